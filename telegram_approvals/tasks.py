"""Thin Celery tasks of the Telegram surface: take ids (or the replies to make), call one
service, stay idempotent. Names from ``telegram_approvals.scheduling``."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from garden.retry import RetryingTask
from telegram_approvals import scheduling
from telegram_approvals.bot import BOT_API_RETRIES
from telegram_approvals.services import approval_message_sync, replies_deliver

# Bot API calls are short (GARDEN_TELEGRAM_TIMEOUT each, a few per task).
LIMITS = {"soft_time_limit": 90, "time_limit": 120}


@shared_task(
    name=scheduling.SYNC_APPROVAL,
    base=RetryingTask,
    retry_policies=BOT_API_RETRIES,
    acks_late=True,
    ignore_result=True,
    **LIMITS,
)
def sync_approval(approval_id: int) -> str:
    """Send a pending approval to its owner's chat, or edit the message to its new state."""
    return approval_message_sync(approval_id=approval_id)


@shared_task(name=scheduling.SEND_REPLIES, acks_late=True, ignore_result=True, **LIMITS)
def send_replies(replies: list[dict[str, Any]]) -> int:
    """Answer a press or a /start (best effort: a late answer is worth nothing)."""
    return replies_deliver(replies=replies)
