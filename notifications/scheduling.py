"""Sending the notifications tasks by name (``garden.scheduling``), so receivers and services
enqueue without importing the tasks (``notifications.tasks`` defines them under these names).
Both send at once: every caller is past its own commit."""

from __future__ import annotations

from garden.scheduling import send

NOTIFY_REPLIES = "notifications.notify_replies"
SEND_TELEGRAM = "notifications.send_telegram"


def notify_replies(request_id: int) -> None:
    """Notify the owner of the replies of a request that ended, in a worker."""
    send(NOTIFY_REPLIES, request_id=request_id)


def send_telegram(owner_id: int, message_ids: list[int]) -> None:
    """Send these replies to the owner's linked Telegram chat, in a worker."""
    if message_ids:
        send(SEND_TELEGRAM, owner_id=owner_id, message_ids=message_ids)
