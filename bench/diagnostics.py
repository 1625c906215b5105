"""Diagnostic tasks the benchmarks chain to measure the floor under the group loop. Only the
benchmarks' workers import this module (``celery worker --include bench.diagnostics``, see
bench/workers.py); deployed workers never register these tasks.
"""

from __future__ import annotations

import time

from celery import shared_task


@shared_task(name="bench.diagnostic_hop", acks_late=True, ignore_result=True)
def diagnostic_hop(remaining: int, key: str) -> None:
    """A bare Celery hop: stamp the time in Redis and enqueue the next hop."""
    from groups.group_lock import redis_client

    redis_client().rpush(key, repr(time.time()))
    if remaining > 1:
        diagnostic_hop.delay(remaining - 1, key)


@shared_task(name="bench.floor_step", acks_late=True, ignore_result=True)
def floor_step(
    group_id: int, request_id: int, conversation_id: int, remaining: int, key: str
) -> None:
    """The least any step does — a Celery hop, the group lock, the request row locked in a
    transaction with a ~500-byte turn appended — stamped in Redis, then the next.

    bench/bench_loop.py reports the loop's overhead per call against this floor, measured on
    the same machine in the same run (ARCHITECTURE.md: within twice this floor).
    """
    from django.db import transaction

    from garden.models import Message
    from garden.services.conversations import message_append, text_block
    from groups.group_lock import group_lock, redis_client
    from groups.models import GroupRequest

    with group_lock(group_id), transaction.atomic():
        GroupRequest.objects.select_for_update().filter(pk=request_id).values_list("fence").first()
        message_append(
            conversation_id=conversation_id,
            speaker_kind=Message.SpeakerKind.GARDEN,
            kind=Message.Kind.NOTICE,
            content=[text_block("x" * 480)],
            request_id=request_id,
        )
    redis_client().rpush(key, repr(time.time()))
    if remaining > 1:
        floor_step.delay(group_id, request_id, conversation_id, remaining - 1, key)
