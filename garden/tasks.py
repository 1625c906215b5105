"""Celery tasks of the garden runtime: thin wrappers that take ids and call one service."""

from celery import shared_task


@shared_task(name="garden.chat_reply", acks_late=True, ignore_result=True)
def chat_reply(message_id: int) -> None:
    from garden.services.chat import chat_reply as service

    service(message_id=message_id)
