"""Set-up shared by the benchmarks and the fault harness: their own database and Redis db, the
capacity settings, and what this process measures (machine, round trips, pg_stat_activity,
queries per step). Worker processes are in bench/workers.py, seeded groups in bench/seeding.py.

Nothing here touches the environment at import; ``use_services`` does, before django.setup().
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def pg_base() -> str:
    return os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test").rsplit("/", 1)[
        0
    ]


# The benchmarks measure capacity, so one owner drives every group: the per-owner quotas are
# lifted, and the simulated provider on loopback is allowed as an operator allows a local model
# (the fault harness's MCP server too, as an operator allows an internal one).
CAPACITY_ENV = {
    "GARDEN_EGRESS_ALLOW_PROVIDERS": "127.0.0.1",
    "GARDEN_EGRESS_ALLOW_MCP": "127.0.0.1",
    "GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER": "100000",
    "GARDEN_MAX_QUEUED_PER_OWNER": "100000",
    "GARDEN_MAX_QUEUED_PER_GROUP": "100000",
    "GARDEN_MAX_GROUPS_PER_OWNER": "100000",
    "GARDEN_MAX_AGENTS_PER_OWNER": "100000",
    "GARDEN_MAX_MODEL_ACCOUNTS_PER_OWNER": "100000",
}


def use_services(*, database: str, redis_url: str, extra: dict[str, str] | None = None) -> None:
    """Point this process (and the workers it starts) at ``database`` and ``redis_url``."""
    os.environ["DATABASE_URL"] = f"{pg_base()}/{database}"
    os.environ["REDIS_URL"] = redis_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("GARDEN_LOG_LEVEL", "ERROR")
    for name, value in CAPACITY_ENV.items():
        os.environ.setdefault(name, value)
    os.environ.update(extra or {})
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def ensure_database(database: str, *, fresh: bool = False) -> None:
    """Create ``database`` if missing (or drop and recreate it) and migrate it."""
    import psycopg

    with psycopg.connect(f"{pg_base()}/postgres", autocommit=True) as conn:
        exists = conn.execute("select 1 from pg_database where datname = %s", [database]).fetchone()
        if exists and fresh:
            conn.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity where datname = %s",
                [database],
            )
            conn.execute(f'drop database "{database}"')
            exists = None
        if not exists:
            conn.execute(f'create database "{database}"')
    env = {**os.environ, "DATABASE_URL": f"{pg_base()}/{database}"}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, env=env, check=True
    )


def machine_line() -> str:
    import redis
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("show server_version")
        pg = cur.fetchone()[0].split()[0]
    from django.conf import settings

    rv = redis.Redis.from_url(settings.REDIS_URL).info("server")["redis_version"]
    import celery

    return (
        f"machine: {platform.node()}, {os.cpu_count()} cores, {_memory()}, Python "
        f"{platform.python_version()}, PostgreSQL {pg}, Redis {rv}, Celery {celery.__version__}, "
        f"Django {__import__('django').get_version()}"
    )


def round_trips(n: int = 500) -> str:
    """Median round trip of a trivial PostgreSQL query and of a Redis PING on this machine."""
    import statistics

    import redis
    from django.db import connection

    def median_ms(call) -> float:
        times = []
        for _ in range(n):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1000

    with connection.cursor() as cur:
        pg = median_ms(lambda: (cur.execute("select 1"), cur.fetchone()))
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    return (
        f"round trips (p50 of {n}): PostgreSQL select 1 {pg:.3f} ms, "
        f"Redis PING {median_ms(client.ping):.3f} ms"
    )


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) // 1024} MiB RAM"
    except OSError:
        pass
    return "RAM unknown"


# --- measurements: pg_stat_activity, percentiles, queries per step ------------------------------


class PgProbe:
    """One autocommit connection that watches ``database`` from outside the workers."""

    def __init__(self, database: str) -> None:
        import psycopg

        self.database = database
        self.conn = psycopg.connect(f"{pg_base()}/{database}", autocommit=True)
        self.exclude: set[int] = {self.conn.info.backend_pid}

    def connections(self) -> tuple[int, int]:
        """Client backends on ``database`` now (open, and busy: not idle in a pool), this
        probe and ``exclude`` left out."""
        return self.conn.execute(
            "select count(*), count(*) filter (where state <> 'idle') from pg_stat_activity"
            " where datname = %s and backend_type = 'client backend' and not (pid = any(%s))",
            [self.database, list(self.exclude)],
        ).fetchone()

    def scalar(self, sql: str, params: list | None = None) -> Any:
        return self.conn.execute(sql, params or []).fetchone()[0]

    def close(self) -> None:
        self.conn.close()


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def step_queries(group) -> list[int]:
    """Statements of each step of one request of ``group``, run in this process as a worker
    runs them: one delivery that goes on in place (its first step claims its own fence; each
    later one was claimed, and its call reserved, by the write of the step before)."""
    from groups.services.requests import request_create, request_start_next
    from tests.support.driving import statements_per_step

    request = request_create(group=group, text="Keep digging.")
    request_start_next(group_id=group.pk)
    request.refresh_from_db()
    return statements_per_step(request)
