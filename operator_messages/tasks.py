"""Celery task of the gardener: a thin wrapper the beat schedule calls every fifteen minutes."""

from celery import shared_task

from .gardener import tend as service


@shared_task(
    name="operator_messages.tend",
    acks_late=True,
    ignore_result=True,
    soft_time_limit=240,
    time_limit=300,
)
def tend() -> None:
    # A redelivered tend only surveys again; there is nothing to deduplicate.
    service()
