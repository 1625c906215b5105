"""Shared pieces of the load bench and the fault harness: their own database and Redis db,
groups whose agents use the ``openai`` adapter against the fake provider, real worker
processes, and what /proc and pg_stat_activity say about them.

Nothing here touches the environment at import; ``use_services`` does, before django.setup().
"""

from __future__ import annotations

import os
import platform
import signal
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
# lifted, and the simulated provider on loopback is allowed as an operator allows a local model.
CAPACITY_ENV = {
    "GARDEN_EGRESS_ALLOW_PROVIDERS": "127.0.0.1",
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


# --- groups on the fake provider ------------------------------------------------------------


def build_group(*, username: str, base_url: str, timeout: float = 30.0, member: str = "ledger"):
    """A group of Concierge (coordinator) and one member, both on the ``openai`` adapter at
    ``base_url``. One owner per group, so each group's accounts carry its own tag."""
    from django.contrib.auth import get_user_model

    from garden.models import Agent
    from garden.services.agents import agent_builtins_ensure, agent_create, model_account_create
    from groups.models import Group, Membership

    user = get_user_model().objects.create(username=username)
    concierge = agent_builtins_ensure(owner=user)[Agent.Builtin.CONCIERGE]
    account = model_account_create(
        owner=user,
        name="fake",
        provider="openai",
        model="fake",
        base_url=base_url,
        timeout_seconds=timeout,
    )
    concierge.model_account = account
    concierge.save(update_fields=["model_account"])
    group = Group.objects.create(owner=user, name=f"{username} team", coordinator=concierge)
    Membership.objects.create(group=group, agent=concierge, position=0)
    agent = agent_create(owner=user, handle=member, name=member.title(), model_account=account)
    Membership.objects.create(group=group, agent=agent, position=1)
    return group


def retarget(group, *, base_url: str | None = None, timeout: float | None = None) -> None:
    """Point a group's accounts at another base URL or timeout."""
    from garden.models import ModelAccount

    changes: dict[str, Any] = {}
    if base_url is not None:
        changes["base_url"] = base_url
    if timeout is not None:
        changes["timeout_seconds"] = timeout
    ModelAccount.objects.filter(owner_id=group.owner_id, provider="openai").update(**changes)


# --- workers --------------------------------------------------------------------------------


# The production settings (DEBUG off: no query log), as a deployment runs its workers; the
# benchmarks start theirs with it. (The fault harness does not: it shortens the timeout chain,
# which production settings refuse.)
DEPLOYED_ENV = {"GARDEN_ENV": "production", "DJANGO_SECRET_KEY": "bench-only-not-secret"}


class Worker:
    """One ``celery worker`` process, started as a deployment starts it."""

    _count = 0

    def __init__(
        self,
        *,
        pool: str = "threads",
        concurrency: int = 8,
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
        name: str = "w",
        loglevel: str = "warning",
    ) -> None:
        Worker._count += 1
        self.name = f"{name}{Worker._count}"
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "--quiet",
            "-A",
            "config",
            "worker",
            f"--pool={pool}",
            f"--concurrency={concurrency}",
            f"--hostname={self.name}-{os.getpid()}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            f"--loglevel={loglevel}",
            "--include=bench.diagnostics",
        ]
        self.log_path = log_path
        self.log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        self.pid = self.proc.pid
        self.started = time.monotonic()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive:
            os.kill(self.pid, sig)

    def stop(self, timeout: float = 15.0) -> None:
        """Warm shutdown (SIGTERM), SIGKILL after ``timeout``; kills the process group."""
        if self.alive:
            try:
                os.kill(self.pid, signal.SIGCONT)
                os.kill(self.pid, signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            with _suppress():
                os.killpg(self.pid, signal.SIGKILL)
            self.proc.wait(10)
        if hasattr(self.log, "close"):
            self.log.close()


try:  # resolved here, in the parent: the child between fork and exec only calls it
    import ctypes

    _prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
except OSError:
    _prctl = None


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the bench that started it dies (Linux), so an
    interrupted run leaves no worker behind consuming from its Redis db."""
    if _prctl is not None:
        _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], ProcessLookupError | PermissionError)


# --- /proc and pg_stat_activity --------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def process_tree(pid: int) -> list[int]:
    tree, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += tree.get(p, [])
    return out


def rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and all its descendants (VmRSS from /proc)."""
    total = 0
    for p in process_tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` and its live descendants."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for p in process_tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def socket_owner(local_port: int, pids: list[int]) -> int | None:
    """Which of ``pids`` (or their descendants) owns the TCP socket bound to ``local_port``."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == local_port:
                inodes.add(fields[9])
    if not inodes:
        return None
    wanted = {f"socket:[{i}]" for i in inodes}
    for root in pids:
        for p in process_tree(root):
            try:
                for fd in Path(f"/proc/{p}/fd").iterdir():
                    try:
                        if os.readlink(fd) in wanted:
                            return root
                    except OSError:
                        continue
            except OSError:
                continue
    return None


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
    """Queries of each step of one request of ``group``, run in this process (the same code a
    worker runs)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from groups.services.requests import request_create, request_start_next
    from groups.step import advance_request

    request = request_create(group=group, text="Keep digging.")
    request_start_next(group_id=group.pk)
    counts = []
    for _ in range(20):
        request.refresh_from_db()
        if request.state not in ("running", "synthesizing"):
            break
        with CaptureQueriesContext(connection) as q:
            advance_request(request_id=request.pk, fence=request.fence, group_id=group.pk)
        counts.append(len(q.captured_queries))
    return counts
