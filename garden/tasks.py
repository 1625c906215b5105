"""Celery tasks of the garden runtime: thin wrappers that take ids and call one service."""

from celery import shared_task


@shared_task(name="garden.chat_reply", acks_late=True, ignore_result=True)
def chat_reply(message_id: int) -> None:
    from garden.services.chat import chat_reply as service

    service(message_id=message_id)


@shared_task(name="garden.diagnostic_hop", acks_late=True, ignore_result=True)
def diagnostic_hop(remaining: int, key: str) -> None:
    """Diagnostics: a bare Celery hop — stamp the time in Redis and enqueue the next hop.

    bench/bench_loop.py compares the group loop's per-call overhead with this floor.
    """
    import time

    from groups.locks import redis_client

    redis_client().rpush(key, repr(time.time()))
    if remaining > 1:
        diagnostic_hop.delay(remaining - 1, key)
