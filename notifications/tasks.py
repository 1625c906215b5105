"""Thin Celery tasks of notifications: take ids, call one service, stay idempotent. Names from
``notifications.scheduling``."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from telegram.error import NetworkError, RetryAfter

from notifications import scheduling
from notifications.services import replies_notify, telegram_replies_send

# A few reads and pushes; Telegram's calls are short (GARDEN_TELEGRAM_TIMEOUT each).
LIMITS = {"soft_time_limit": 90, "time_limit": 120}


@shared_task(name=scheduling.NOTIFY_REPLIES, acks_late=True, ignore_result=True, **LIMITS)
def notify_replies(request_id: int) -> dict[str, Any]:
    """Notify the owner of the replies of a request that ended."""
    return replies_notify(request_id=request_id)


@shared_task(name=scheduling.SEND_TELEGRAM, bind=True, acks_late=True, ignore_result=True, **LIMITS)
def send_telegram(self, owner_id: int, message_ids: list[int]) -> int:
    """Send replies to the owner's linked Telegram chat."""
    try:
        return telegram_replies_send(owner_id=owner_id, message_ids=message_ids)
    except RetryAfter as exc:
        raise self.retry(countdown=_seconds(exc.retry_after) + 1, max_retries=5, exc=exc) from exc
    except NetworkError as exc:  # unreachable or timed out (an egress refusal is not retried)
        if self.request.retries >= 5:
            raise
        raise self.retry(countdown=min(2**self.request.retries, 30), exc=exc) from exc


def _seconds(value: Any) -> float:
    return value.total_seconds() if hasattr(value, "total_seconds") else float(value)
