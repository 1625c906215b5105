"""Thin Celery tasks of notifications: take ids, call one service, stay idempotent. Names from
``notifications.scheduling``."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from garden.retry import RetryingTask
from notifications import scheduling
from notifications.services import replies_notify, telegram_replies_send
from telegram_approvals.bot import BOT_API_RETRIES

# A few reads and pushes; Telegram's calls are short (GARDEN_TELEGRAM_TIMEOUT each).
LIMITS = {"soft_time_limit": 90, "time_limit": 120}


@shared_task(name=scheduling.NOTIFY_REPLIES, acks_late=True, ignore_result=True, **LIMITS)
def notify_replies(request_id: int) -> dict[str, Any]:
    """Notify the owner of the replies of a request that ended."""
    return replies_notify(request_id=request_id)


@shared_task(
    name=scheduling.SEND_TELEGRAM,
    base=RetryingTask,
    retry_policies=BOT_API_RETRIES,
    acks_late=True,
    ignore_result=True,
    **LIMITS,
)
def send_telegram(owner_id: int, message_ids: list[int]) -> int:
    """Send replies to the owner's linked Telegram chat."""
    return telegram_replies_send(owner_id=owner_id, message_ids=message_ids)
