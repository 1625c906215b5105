"""Thin Celery tasks of the Telegram surface: take ids (or the replies to make), call one
service, stay idempotent. Names from ``telegram_approvals.scheduling``."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from telegram.error import NetworkError, RetryAfter

from telegram_approvals import scheduling
from telegram_approvals.services import approval_message_sync, replies_deliver

# Bot API calls are short (GARDEN_TELEGRAM_TIMEOUT each, a few per task).
LIMITS = {"soft_time_limit": 90, "time_limit": 120}


@shared_task(name=scheduling.SYNC_APPROVAL, bind=True, acks_late=True, ignore_result=True, **LIMITS)
def sync_approval(self, approval_id: int) -> str:
    """Send a pending approval to its owner's chat, or edit the message to its new state."""
    try:
        return approval_message_sync(approval_id=approval_id)
    except RetryAfter as exc:
        raise self.retry(countdown=_seconds(exc.retry_after) + 1, max_retries=5, exc=exc) from exc
    except NetworkError as exc:  # unreachable or timed out (an egress refusal is not retried)
        if self.request.retries >= 5:
            raise
        raise self.retry(countdown=min(2**self.request.retries, 30), exc=exc) from exc


def _seconds(value: Any) -> float:
    return value.total_seconds() if hasattr(value, "total_seconds") else float(value)


@shared_task(name=scheduling.SEND_REPLIES, acks_late=True, ignore_result=True, **LIMITS)
def send_replies(replies: list[dict[str, Any]]) -> int:
    """Answer a press or a /start (best effort: a late answer is worth nothing)."""
    return replies_deliver(replies=replies)
