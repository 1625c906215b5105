"""What bench/bench_loop.py measures with: the gaps between a request's reservations, chains
of Celery hops timed from stamps in Redis, the workers' CPU around a run, a thread seeded with
earlier turns, and waiting for requests to finish."""

from __future__ import annotations

import itertools
import os
import time

from bench.support import PgProbe
from bench.workers import Worker, cpu_seconds

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/2")


def reservation_gaps(request_id: int) -> list[float]:
    """Milliseconds between consecutive working/synthesis calls of one request, each taken
    when its reply was recorded (its reservation's ``finished_at``, set by the step's write):
    one whole step from record to record, wherever in it the reservation was made (a step's
    write may reserve the next step's call ahead)."""
    from groups.models import CallReservation

    stamps = list(
        CallReservation.objects.filter(
            request_id=request_id, status=CallReservation.Status.CONSUMED
        )
        .exclude(purpose=CallReservation.Purpose.MAINTENANCE)
        .order_by("finished_at")
        .values_list("finished_at", flat=True)
    )
    return [(b - a).total_seconds() * 1000 for a, b in itertools.pairwise(stamps)]


def seed_thread(group, turns: int, *, whole_room: bool = False) -> None:
    """Give the group's open thread ``turns`` earlier turns (~80 characters each), as a
    long-running conversation would have: owner and member alternating or, ``whole_room``,
    each earlier request as a room has it — the owner, the coordinator asking, the member
    answering, the coordinator concluding — so every agent's own turns break the room
    context, and bounding can drop the oldest turns whole at any cap."""
    from django.db import transaction

    from garden.models import Message
    from garden.services.conversations import messages_append, text_block
    from groups.services.requests import group_conversation_open

    member = group.memberships.exclude(agent_id=group.coordinator_id).first().agent
    coordinator = group.coordinator
    cycle = [None, coordinator, member, coordinator] if whole_room else [None, member]
    with transaction.atomic():
        conversation = group_conversation_open(group=group)
        batch = []
        for i in range(turns):
            speaker = cycle[i % len(cycle)]
            batch.append(
                Message(
                    speaker_kind="agent" if speaker else "owner",
                    speaker_agent=speaker,
                    content=[
                        text_block(f"Earlier turn {i}: a figure, a question, a short answer.")
                    ],
                )
            )
        messages_append(conversation_id=conversation.pk, messages=batch)


def wait_finished(probe: PgProbe, ids: list[int], timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while probe.scalar(
        "select count(*) from groups_grouprequest where id = any(%s) and state not in "
        "('completed', 'stopped', 'failed')",
        [ids],
    ):
        if time.monotonic() > deadline:
            raise SystemExit("requests did not finish")
        time.sleep(0.01)


def bare_hops(app, n: int) -> list[float]:
    """A task that enqueues the next, n times; per-hop time from the stamps in Redis."""
    return chained(app, "bench.diagnostic_hop", [], n)


def with_cpu(workers: list[Worker], run) -> tuple[list[float], float]:
    """``run()``'s result and the workers' CPU ms it took."""
    before = sum(cpu_seconds(w.pid) for w in workers)
    result = run()
    return result, (sum(cpu_seconds(w.pid) for w in workers) - before) * 1000


def chained(app, task: str, args: list, n: int) -> list[float]:
    import redis

    key = f"garden:bench:hops:{time.time_ns()}"
    client = redis.Redis.from_url(REDIS_URL)
    app.send_task(task, args=[*args, n, key])
    deadline = time.monotonic() + 120
    while client.llen(key) < n and time.monotonic() < deadline:
        time.sleep(0.02)
    stamps = [float(x) for x in client.lrange(key, 0, -1)]
    client.delete(key)
    return [(b - a) * 1000 for a, b in itertools.pairwise(stamps)]
