"""Celery tasks of the garden runtime: thin wrappers that take ids and call one service."""

import random

from celery import shared_task
from django.conf import settings


@shared_task(
    name="garden.chat_reply", bind=True, acks_late=True, ignore_result=True, max_retries=None
)
def chat_reply(self, message_id: int) -> None:
    from garden.services.chat import CallSlotsBusy
    from garden.services.chat import chat_reply as service

    try:
        service(message_id=message_id)
    except CallSlotsBusy as exc:
        # The owner's other calls hold every slot: come back without holding a worker thread.
        pause = settings.GARDEN_CALL_SLOT_RETRY_SECONDS * random.uniform(0.8, 1.2)
        raise self.retry(countdown=pause, exc=exc) from exc
