"""Celery tasks of the garden runtime: thin wrappers that take ids and call one service."""

from celery import shared_task

from garden.services.chat import CHAT_REPLY_TASK, CallSlotsBusy, ReplyLater
from garden.services.chat import chat_reply as service
from garden.slots import slot_backoff


@shared_task(name=CHAT_REPLY_TASK, bind=True, acks_late=True, ignore_result=True, max_retries=None)
def chat_reply(self, message_id: int, attempt: int = 1, first_at: float | None = None) -> None:
    try:
        service(message_id=message_id, attempt=attempt, first_at=first_at)
    except ReplyLater as later:
        # The provider asked us to wait: the wait is a countdown on the broker, so the worker
        # thread answers others meanwhile; the next attempt counts against the same ceiling.
        raise self.retry(
            countdown=later.countdown,
            kwargs={"message_id": message_id, "attempt": later.attempt, "first_at": later.first_at},
            exc=later,
        ) from later
    except CallSlotsBusy as exc:
        # The owner's other calls hold every slot: come back without holding a worker thread,
        # each look later than the last (jittered), as a group step does.
        pause = slot_backoff(self.request.retries)
        raise self.retry(countdown=pause, exc=exc) from exc
