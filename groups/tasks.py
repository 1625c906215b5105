"""Thin Celery tasks of the group loop: take ids, call one service, stay idempotent. Their
names come from ``groups.scheduling``, which is how everything below sends them."""

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError
from redis.exceptions import RedisError

from garden import metrics, telemetry
from garden.retry import RetryingTask, RetryPolicy
from groups import scheduling
from groups.group_lock import LockContended
from groups.loop.rollover import request_after_finish
from groups.loop.step import advance_request as step
from groups.selectors import approval_trace_context
from groups.services.approvals import approval_execute, sweep_stranded
from groups.services.groups import group_purge_expired
from groups.services.request_sweep import request_for_unanswered_turn
from groups.services.requests import request_start_next
from groups.services.webhook_sending import (
    webhook_delivery_attempt,
    webhook_delivery_purge,
    webhook_delivery_sweep,
)

# Another step of this group holds the lock; ours comes after it, by fence, and the step
# holding it finishes in about a model call.
WHEN_CONTENDED = RetryPolicy(on=(LockContended,), backoff=0.1, backoff_max=5.0)
# A dropped database or Redis connection: deliver again shortly. The redelivery re-claims by
# fence, so whatever this attempt wrote or lost stays consistent.
WHEN_DISCONNECTED = RetryPolicy(
    on=(DatabaseError, RedisError), backoff=0.5, backoff_max=15.0, times=20
)


@shared_task(
    name=scheduling.ADVANCE_REQUEST,
    base=RetryingTask,
    retry_policies=(WHEN_CONTENDED, WHEN_DISCONNECTED),
    bind=True,
    acks_late=True,
    ignore_result=True,
)
def advance_request(
    self,
    request_id: int,
    fence: int,
    attempt: int = 1,
    first_at: float | None = None,
    group_id: int | None = None,
    waits: int = 0,
    tools: bool = False,
) -> str:
    """One step of a request (at most one model call), and the request's next steps in place
    while this delivery holds its room (GARDEN_STEPS_PER_DELIVERY). Duplicate or stale
    deliveries no-op."""
    with telemetry.sent_from(self.request.get(telemetry.TASK_HEADER)):
        return step(
            request_id=request_id,
            fence=fence,
            attempt=attempt,
            first_at=first_at,
            group_id=group_id,
            waits=waits,
            tools=tools,
            steps=settings.GARDEN_STEPS_PER_DELIVERY,
        )


@shared_task(name=scheduling.START_NEXT_REQUEST, acks_late=True, ignore_result=True)
def start_next_request(group_id: int) -> None:
    request_start_next(group_id=group_id)


@shared_task(name=scheduling.LEGACY_CHAT_REPLY, acks_late=True, ignore_result=True)
def legacy_chat_reply(message_id: int, attempt: int = 1, first_at: float | None = None) -> None:
    """A 1:1 reply sent before 1:1 messages ran on the group loop, still on the broker: its
    owner turn becomes a request of the agent's room (``attempt`` and ``first_at`` are the
    old task's and mean nothing now)."""
    request_for_unanswered_turn(message_id=message_id)


@shared_task(name=scheduling.SWEEP_REQUESTS, acks_late=True, ignore_result=True)
def sweep_requests() -> dict:
    """Periodic (beat): put back on their way the requests and approvals a crash stranded;
    see sweep_stranded."""
    found = sweep_stranded()
    metrics.sweeper_recovered(found)
    return found


@shared_task(name=scheduling.EXECUTE_APPROVAL, acks_late=True, ignore_result=True)
def execute_approval(approval_id: int, waits: int = 0) -> str:
    """Run an approved action exactly once and resume its request (in the request's trace);
    ``waits``: the times it found no free tool slot of its owner (approval_execute)."""
    with telemetry.joined(
        "garden.approval.execute",
        trace_context=lambda: approval_trace_context(approval_id=approval_id),
        attributes={"garden.approval.id": approval_id},
    ) as span:
        done = approval_execute(approval_id=approval_id, waits=waits)
        span.set({"garden.approval.outcome": done})
        return done


@shared_task(
    name=scheduling.AFTER_REQUEST,
    base=RetryingTask,
    retry_policies=(WHEN_CONTENDED,),
    acks_late=True,
    ignore_result=True,
)
def after_request(request_id: int) -> str:
    """After a completed request: roll the thread over if it is full, then start the next."""
    return request_after_finish(request_id=request_id)


@shared_task(name=scheduling.PURGE_DELETED_GROUPS, acks_late=True, ignore_result=True)
def purge_deleted_groups(owner_id: int | None = None) -> int:
    """Periodic (beat), and after a group-list read that saw one due: remove for good the
    groups whose minute to undo has passed (one owner's, or everyone's)."""
    return group_purge_expired(owner_id=owner_id)


@shared_task(
    name=scheduling.DELIVER_WEBHOOK,
    acks_late=True,
    ignore_result=True,
    # Within the try's claim (GARDEN_WEBHOOK_TIMEOUT + 30 s): a try the limit ends is re-sent
    # by the sweep only once its claim has lapsed.
    soft_time_limit=settings.GARDEN_WEBHOOK_TIMEOUT + 15,
    time_limit=settings.GARDEN_WEBHOOK_TIMEOUT + 25,
    # A dropped database connection: deliver the message again (the claim makes it safe).
    # The delivery's own back-off between tries is its row's next_attempt_at.
    autoretry_for=(DatabaseError,),
    retry_backoff=1,
    retry_backoff_max=30,
    max_retries=5,
)
def deliver_webhook(delivery_id: int, waits: int = 0) -> str:
    """One try of a webhook delivery, if it is pending and due and its owner has a free
    webhook slot (webhook_delivery_attempt; ``waits``: its earlier looks for one)."""
    return webhook_delivery_attempt(delivery_id=delivery_id, waits=waits)


@shared_task(name=scheduling.SWEEP_WEBHOOKS, acks_late=True, ignore_result=True)
def sweep_webhooks() -> int:
    """Periodic (beat): send again the deliveries whose next try is well past."""
    return webhook_delivery_sweep()


@shared_task(name=scheduling.PURGE_WEBHOOKS, acks_late=True, ignore_result=True)
def purge_webhooks() -> int:
    """Periodic (beat): remove finished deliveries older than GARDEN_WEBHOOK_KEEP_DAYS."""
    return webhook_delivery_purge()
