"""Orchestration overhead of the group loop on PostgreSQL + Redis + real worker processes.

With a zero-latency scripted model, the time between one reservation of a request and the
next is the loop's own cost per model call: the Celery hop, the lock, the fence claim, the
projection, the reservation, the record and the enqueue. A bare Celery hop (a task that
enqueues the next) is measured in the same run for comparison, and so are the queries one
step makes.

Run: python bench/bench_loop.py [--groups 40] [--workers 1 2]
Needs PostgreSQL and Redis (DATABASE_URL / REDIS_URL, else the local defaults); uses its own
database ``garden_bench`` and Redis db 2 so it never touches other data.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PG_BASE = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test").rsplit("/", 1)[0]
os.environ["DATABASE_URL"] = f"{PG_BASE}/garden_bench"
os.environ["REDIS_URL"] = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/2")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("GARDEN_LOG_LEVEL", "ERROR")


def ensure_database() -> None:
    import psycopg

    with psycopg.connect(f"{PG_BASE}/postgres", autocommit=True) as conn:
        if not conn.execute("select 1 from pg_database where datname='garden_bench'").fetchone():
            conn.execute("create database garden_bench")
    subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, check=True)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=40)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--hops", type=int, default=300)
    args = parser.parse_args()

    ensure_database()
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection, connections
    from django.test.utils import CaptureQueriesContext

    from config.celery import app
    from garden.worker import running_worker
    from groups.coordinator import advance_request
    from groups.models import CallReservation, Group, GroupRequest
    from groups.services.requests import request_create, request_start_next
    from tests.groups.conftest import make_group

    app.control.purge()
    User = get_user_model()
    ask = {"name": "group.ask", "arguments": {"member": "ledger", "request": "One more figure."}}

    def fresh_groups(n: int, tag: str) -> list[Group]:
        GroupRequest.objects.all().delete()
        user, _ = User.objects.get_or_create(username=f"bench-{tag}")
        return [make_group(user, name=f"g{i}", members={"ledger": [{"reply": "A figure."}]},
                           concierge_rules=[{"when": "consolidated answer", "reply": "Final."},
                                            {"reply": {"text": "More.", "tool_calls": [ask]}}])
                for i in range(n)]

    print(f"machine: {platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"PostgreSQL {connection.cursor().connection.info.server_version}, Redis "
          f"{__import__('redis').Redis.from_url(os.environ['REDIS_URL']).info()['redis_version']}")

    # Queries per step, in this process (the same code a worker runs).
    group = fresh_groups(1, "queries")[0]
    request = request_create(group=group, text="Keep digging.")
    request_start_next(group_id=group.pk)
    per_step = []
    for _ in range(12):
        request.refresh_from_db()
        with CaptureQueriesContext(connection) as q:
            advance_request(request_id=request.pk, fence=request.fence)
        per_step.append(len(q.captured_queries))
    print(f"queries per step: median {statistics.median(per_step):.0f}, max {max(per_step)} "
          f"(12 steps of a 12-call request)")
    connections.close_all()

    for workers in args.workers:
        env = {"GARDEN_LOG_LEVEL": "ERROR"}
        workers_cm = [running_worker(pool="threads", concurrency=8, env=env,
                                     log_path=Path("/tmp") / f"bench-worker-{i}.log")
                      for i in range(workers)]
        for cm in workers_cm:
            cm.__enter__()
        try:
            time.sleep(2.0)
            hop = bare_hops(app, args.hops)
            # Overhead: one request alone, so the gaps are the loop's cost, not queueing.
            group = fresh_groups(1, f"solo-{workers}")[0]
            gaps = []
            for _ in range(5):
                r = request_create(group=group, text="Keep digging.")
                wait_finished([r.pk])
                stamps = list(CallReservation.objects.filter(request=r).order_by("id")
                              .values_list("created_at", flat=True))
                gaps += [(b - a).total_seconds() * 1000 for a, b in zip(stamps, stamps[1:], strict=False)]
            # Throughput: every group at once.
            groups = fresh_groups(args.groups, f"load-{workers}")
            t0 = time.perf_counter()
            ids = [request_create(group=g, text="Keep digging.").pk for g in groups]
            wait_finished(ids)
            wall = time.perf_counter() - t0
            calls = CallReservation.objects.filter(request_id__in=ids).count()
        finally:
            for cm in workers_cm:
                cm.__exit__(None, None, None)
            connections.close_all()
        med, p95 = statistics.median(gaps), pct(gaps, 0.95)
        print(f"\nworkers={workers} (threads pool, 8 each)")
        print(f"  bare Celery hop:           median {statistics.median(hop):6.2f} ms  p95 {pct(hop, .95):6.2f} ms")
        print(f"  loop overhead per call:    median {med:6.2f} ms  p95 {p95:6.2f} ms  "
              f"({med / statistics.median(hop):.1f}x the bare hop)")
        print(f"  vs a 500 ms model call:    {med / 500 * 100:.2f}% median, {p95 / 500 * 100:.2f}% p95")
        print(f"  throughput, {args.groups} groups x 12 calls: {calls} calls in {wall:.2f} s = "
              f"{calls / wall:.0f} calls/s")


def wait_finished(ids: list[int], timeout: float = 600) -> None:
    from groups.models import GroupRequest

    deadline = time.monotonic() + timeout
    while GroupRequest.objects.filter(pk__in=ids).exclude(state__in=GroupRequest.FINISHED_STATES).exists():
        if time.monotonic() > deadline:
            raise SystemExit("requests did not finish")
        time.sleep(0.02)


def bare_hops(app, n: int) -> list[float]:
    """A task that enqueues the next, n times; per-hop time from the stamps in Redis."""
    import redis

    key = "garden:bench:hops"
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    client.delete(key)
    app.send_task("garden.diagnostic_hop", args=[n, key])
    deadline = time.monotonic() + 120
    while client.llen(key) < n and time.monotonic() < deadline:
        time.sleep(0.02)
    stamps = [float(x) for x in client.lrange(key, 0, -1)]
    return [(b - a) * 1000 for a, b in zip(stamps, stamps[1:], strict=False)]


if __name__ == "__main__":
    main()
