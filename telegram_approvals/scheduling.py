"""Sending the Telegram surface's tasks by name (``garden.scheduling``), so that services and
receivers enqueue without importing the tasks (``telegram_approvals.tasks`` defines them
under these names). Both send at once: every caller is past its own commit."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from garden.scheduling import send

SYNC_APPROVAL = "telegram.sync_approval"
SEND_REPLIES = "telegram.send_replies"


def sync_approvals(approval_ids: Iterable[int]) -> None:
    """Bring each approval's Telegram message up to date (send it, or edit it), in a worker."""
    for approval_id in approval_ids:
        send(SYNC_APPROVAL, approval_id=approval_id)


def send_replies(replies: list[dict[str, Any]]) -> None:
    """Make the Bot API calls that answer an update (a press, a /start), in a worker."""
    if replies:
        send(SEND_REPLIES, replies=replies)
