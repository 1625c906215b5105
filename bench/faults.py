"""Fault harness: crash, pause and cut real worker processes, Redis and PostgreSQL under live
group requests, and check the loop's invariants from the database after every trial.

Scenarios (all on loopback, against the ``openai`` adapter and bench/fake_provider.py):

- SIGKILL a worker at five points of a step: before the reservation, after it (before the
  dispatch), during the model call, after the reply (before the write), after the write
  (before the enqueue). Four points are groups.faults.fault_point calls in the coordinator;
  "during the call" is a SIGKILL from here while the provider holds the worker's request.
- SIGSTOP a worker inside a model call past its lock TTL, let another worker take the step
  over (the sweeper re-enqueues it by fence), then SIGCONT: the stale step must never write.
- Restart Redis (broker and locks; it keeps nothing on disk) and terminate every PostgreSQL
  backend of the harness database, during requests: they must resume or end honestly.
- A provider that times out, resets, answers 429 and 500, in random mixes.

Recovery from lost tasks comes from the sweeper (groups.services.requests.request_sweep), run
here every 0.5 s on requests quiet for 3 s (> the harness lock TTL of 2 s > any live step).

Invariants, per request: reservations within 11 working + 1 synthesis + 1 maintenance and
equal to the row's counters; reservations not released, plus those released for a confirmed
rejection, >= the HTTP requests the provider received for it; exactly one owner message; no
duplicated turn (request, speaker, step) or contribution (same ask answered twice); fences
strictly increasing over reservations and steps non-decreasing over seq; no pending approval on
a finished request; and, within a bound, every request completed, stopped or failed with an
outcome code.

Run: python bench/faults.py [--trials 200] [--only kill,stop,redis,pg,provider]
     [--shared-redis] [--seed N]
Uses its own database ``garden_faults`` (env FAULTS_DATABASE); starts its own redis-server on a
free port (db 4, env FAULTS_REDIS_DB), so its Redis restarts never touch the shared one.
``--shared-redis`` uses and restarts the Redis on 127.0.0.1:6379 instead: only when nothing else
needs it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import queue
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.support import (
    CAPACITY_ENV,
    ROOT,
    Worker,
    _die_with_parent,
    build_group,
    ensure_database,
    machine_line,
    pg_base,
    socket_owner,
    use_services,
)

# Overridable, so that two runs on one machine never share (or flush) one database or Redis db.
DATABASE = os.environ.get("FAULTS_DATABASE", "garden_faults")
REDIS_DB = int(os.environ.get("FAULTS_REDIS_DB", "4"))
POINTS = ("before_reserve", "before_dispatch", "during_call", "after_reply", "after_write")
# Per hit of the point: high enough to die within a few steps, low enough that the step that
# dies is not always a request's first.
KILL_PROBABILITY = 0.3
LOCK_TTL = 2  # seconds, for the harness workers
SWEEP_AGE = 3.0  # seconds quiet before the sweeper re-enqueues: > LOCK_TTL > a live step
SWEEP_INTERVAL = 0.5
ASK = "Keep digging."


def worker_env(database_url: str, redis_url: str) -> dict[str, str]:
    """Environment of every harness worker (and of the zygote that forks them)."""
    return {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "GARDEN_LOCK_TTL_SECONDS": str(LOCK_TTL),
        "GARDEN_DB_POOL_MAX": "4",
        "GARDEN_LOG_LEVEL": "ERROR",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        **CAPACITY_ENV,
    }


# --- worker processes -----------------------------------------------------------------------


class PopenWorker(Worker):
    """A ``celery worker`` exec'd afresh (1-2 s to start); used by the pytest version."""

    @property
    def killed(self) -> bool:
        return self.proc.poll() == -signal.SIGKILL

    def wait_exit(self, timeout: float) -> bool:
        try:
            self.proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False


def popen_spawner(log_dir: Path, base_env: dict[str, str]) -> Callable[..., Any]:
    def spawn(
        *, name: str, env: dict[str, str], concurrency: int, loglevel: str = "warning"
    ) -> PopenWorker:
        return PopenWorker(
            pool="threads",
            concurrency=concurrency,
            env={**base_env, **env},
            log_path=log_dir / f"{name}.log",
            name=name,
            loglevel=loglevel,
        )

    return spawn


class Zygote:
    """A process that has imported Django, Celery and the app once and forks a real Celery
    worker (``app.worker_main``, threads pool) per request in ~0.1 s instead of ~1.3 s."""

    def __init__(self, log_dir: Path, env: dict[str, str]) -> None:
        self.log_dir = log_dir
        self.exited: dict[int, int] = {}
        self._pids: queue.Queue[int] = queue.Queue()
        self._ready = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--zygote"],
            cwd=ROOT,
            env={**os.environ, **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=_die_with_parent,
        )
        threading.Thread(target=self._read, daemon=True, name="zygote-reader").start()
        if not self._ready.wait(60):
            raise RuntimeError("the worker zygote did not start")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "exited" in msg:
                self.exited[msg["exited"]] = msg["status"]
            elif "pid" in msg:
                self._pids.put(msg["pid"])
            elif "ready" in msg:
                self._ready.set()

    def spawn(
        self, *, name: str, env: dict[str, str], concurrency: int, loglevel: str = "warning"
    ) -> ZygoteWorker:
        assert self.proc.stdin is not None
        log_path = self.log_dir / f"{name}.log"
        self.proc.stdin.write(
            json.dumps(
                {
                    "name": name,
                    "env": env,
                    "concurrency": concurrency,
                    "log": str(log_path),
                    "loglevel": loglevel,
                }
            )
            + "\n"
        )
        self.proc.stdin.flush()
        return ZygoteWorker(self, self._pids.get(timeout=30), name, log_path)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


class ZygoteWorker:
    def __init__(self, zygote: Zygote, pid: int, name: str, log_path: Path) -> None:
        self.zygote, self.pid, self.name, self.log_path = zygote, pid, name, log_path

    @property
    def alive(self) -> bool:
        return self.pid not in self.zygote.exited

    @property
    def killed(self) -> bool:
        status = self.zygote.exited.get(self.pid)
        return (
            status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        )

    def signal(self, sig: int) -> None:
        if self.alive:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def wait_exit(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.alive and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self.alive

    def stop(self, timeout: float = 10.0) -> None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        if not self.wait_exit(timeout):
            self.signal(signal.SIGKILL)
            self.wait_exit(10)


def zygote_main() -> None:
    """The zygote: preload, then fork a worker for every JSON line on stdin."""
    import django

    django.setup()
    # Preloaded, so a fork starts fast.
    import celery.apps.worker
    import celery.concurrency.thread  # noqa: F401
    import kombu.transport.redis  # noqa: F401
    from django.db import connections

    import garden.providers.openai  # noqa: F401
    import groups.bounding
    import groups.projection  # noqa: F401
    from config.celery import app

    app.loader.import_default_modules()
    # These read GARDEN_FAULT_POINT at import: each child imports them with its own env.
    assert "groups.faults" not in sys.modules and "groups.coordinator" not in sys.modules
    connections.close_all()
    lock = threading.Lock()

    def emit(obj: dict) -> None:
        with lock:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                time.sleep(0.05)
                continue
            emit({"exited": pid, "status": status})

    threading.Thread(target=reap, daemon=True).start()
    emit({"ready": True})
    for line in sys.stdin:
        cmd = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                _die_with_parent()
                fd = os.open(cmd["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                os.environ.update(cmd["env"])
                app.worker_main(
                    [
                        "worker",
                        "--pool=threads",
                        f"--concurrency={cmd['concurrency']}",
                        f"--hostname={cmd['name']}@%h",
                        "--without-gossip",
                        "--without-mingle",
                        "--without-heartbeat",
                        f"--loglevel={cmd['loglevel']}",
                        "-Q",
                        "celery",
                    ]
                )
            finally:
                os._exit(0)
        emit({"pid": pid})


# --- Redis ----------------------------------------------------------------------------------


class RedisServer:
    """The harness's own redis-server (or the shared one, with ``shared=True``): started the
    way CI starts it, keeping nothing on disk, so a restart loses every queued task and lock."""

    def __init__(self, *, shared: bool) -> None:
        self.shared = shared
        self.restarts = 0
        if shared:
            self.port, self.dir = 6379, Path("/var/lib/redis")
            self.logfile = "/var/log/redis/ci.log"
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            self.dir = Path(tempfile.mkdtemp(prefix="garden-faults-redis-"))
            self.logfile = str(self.dir / "redis.log")
            self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/{REDIS_DB}"

    def start(self) -> None:
        bind = ["127.0.0.1", "-::1"] if self.shared else ["127.0.0.1"]
        subprocess.run(
            [
                "redis-server",
                "--daemonize",
                "yes",
                "--bind",
                *bind,
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.dir),
                "--logfile",
                self.logfile,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        self._wait(up=True)

    def stop(self) -> None:
        subprocess.run(
            ["redis-cli", "-p", str(self.port), "shutdown", "nosave"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait(up=False)

    def restart(self, down_for: float = 0.5) -> None:
        self.stop()
        time.sleep(down_for)
        self.start()
        self.restarts += 1

    def _wait(self, *, up: bool, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ok = (
                subprocess.run(
                    ["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True
                ).stdout.strip()
                == "PONG"
            )
            if ok == up:
                return
            time.sleep(0.05)
        raise RuntimeError(f"redis on {self.port} did not {'start' if up else 'stop'}")

    def close(self) -> None:
        if not self.shared:
            self.stop()
            shutil.rmtree(self.dir, ignore_errors=True)


# --- the harness ----------------------------------------------------------------------------


@dataclass
class Result:
    scenario: str
    trials: int = 0
    faults: int = 0
    requests: list[int] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    outcomes: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    note: str = ""
    details: dict[str, int] = field(default_factory=dict)


def db_retry(fn: Callable[[], Any], attempts: int = 20) -> Any:
    """Run a harness query, reconnecting while PostgreSQL is being cut (the pg scenario)."""
    from django.db import InterfaceError, OperationalError, connection

    for attempt in range(attempts):
        try:
            return fn()
        except (OperationalError, InterfaceError):
            connection.close()
            if attempt == attempts - 1:
                raise
            time.sleep(0.2)
    return None


class Harness:
    """Requests on fresh groups (one request per group, each group tagged at the provider),
    worker processes, the sweeper, and the invariant checks."""

    def __init__(
        self,
        *,
        provider_url: str,
        spawn: Callable[..., Any],
        concurrency: int = 4,
        sweep_age: float = SWEEP_AGE,
        log: Callable[[str], None] = print,
    ) -> None:
        from bench.fake_provider import FakeProviderClient

        self.client = FakeProviderClient(provider_url)
        self.spawn_fn = spawn
        self.concurrency = concurrency
        self.sweep_age = sweep_age
        self.log = log
        self.tags: dict[int, str] = {}
        self.workers: list[Any] = []
        self.run_id = uuid.uuid4().hex[:6]
        self._n = itertools.count(1)
        self._names = itertools.count(1)
        self._sweep_stop = threading.Event()
        self._sweeper: threading.Thread | None = None
        self.sweep_errors = 0
        self._untooled = 0

    # workers

    def spawn(
        self, name: str = "w", env: dict[str, str] | None = None, loglevel: str = "warning"
    ) -> Any:
        worker = self.spawn_fn(
            name=f"{name}{next(self._names)}-{self.run_id}",
            env=env or {},
            concurrency=self.concurrency,
            loglevel=loglevel,
        )
        self.workers.append(worker)
        return worker

    def stop_workers(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.workers.clear()

    # the sweeper

    def start_sweeper(self) -> None:
        self._sweep_stop.clear()
        self._sweeper = threading.Thread(target=self._sweep_loop, daemon=True, name="sweeper")
        self._sweeper.start()

    def stop_sweeper(self) -> None:
        self._sweep_stop.set()
        if self._sweeper:
            self._sweeper.join(10)

    def _sweep_loop(self) -> None:
        from django.db import connection

        from groups.services.requests import request_sweep

        while not self._sweep_stop.wait(SWEEP_INTERVAL):
            try:
                request_sweep(older_than_seconds=self.sweep_age)
            except Exception:  # Redis or PostgreSQL is being cut: next round
                self.sweep_errors += 1
                connection.close()
        connection.close()

    # requests

    def new_requests(
        self, n: int, *, latency: float, timeout: float = 10.0, **faults: float
    ) -> list[int]:
        """``n`` fresh groups, one request each; ``faults`` are fake-provider options for them."""
        from groups.services.requests import request_create

        ids = []
        for _ in range(n):
            tag = f"{self.run_id}-{next(self._n)}"
            self.client.configure(tags={tag: {"latency": latency, **faults}})
            group = db_retry(
                lambda tag=tag: build_group(
                    username=f"faults-{tag}", base_url=self.client.base_url(tag), timeout=timeout
                )
            )
            request = db_retry(
                lambda group=group, tag=tag: request_create(group=group, text=f"{ASK} [{tag}]")
            )
            self.tags[request.pk] = tag
            ids.append(request.pk)
        return ids

    def unfinished(self, ids: list[int]) -> list[int]:
        from groups.models import GroupRequest

        return db_retry(
            lambda: list(
                GroupRequest.objects.filter(pk__in=ids)
                .exclude(state__in=GroupRequest.FINISHED_STATES)
                .values_list("pk", flat=True)
            )
        )

    def fences(self, ids: list[int]) -> dict[int, tuple[int, int]]:
        from groups.models import GroupRequest

        return db_retry(
            lambda: {
                pk: (f, c)
                for pk, f, c in GroupRequest.objects.filter(pk__in=ids).values_list(
                    "pk", "fence", "completed_fence"
                )
            }
        )

    def calls_in_flight(self, workers: list[Any]) -> list[tuple[int, int, Any]]:
        """(request id, client port, worker) of each model call the provider holds now for
        one of ``workers``."""
        by_tag = self.client.stats()["in_flight_by_tag"]
        request_of = {tag: pk for pk, tag in self.tags.items()}
        out = []
        for tag, ports in by_tag.items():
            if tag not in request_of:
                continue
            for port in ports:
                pid = socket_owner(port, [w.pid for w in workers])
                owner = next((w for w in workers if w.pid == pid), None)
                if owner is not None:
                    out.append((request_of[tag], port, owner))
        return out

    def port_in_flight(self, request_id: int, port: int) -> bool:
        return port in self.client.stats()["in_flight_by_tag"].get(self.tags[request_id], [])

    # invariants

    def check_safety(self, ids: list[int]) -> list[str]:
        return db_retry(lambda: self._check_safety(ids))

    def _check_safety(self, ids: list[int]) -> list[str]:
        from django.db import connection, transaction

        # The provider first: every dispatch it has seen was reserved (and committed) before.
        seen = self.client.stats()["per_tag"]
        # Then one snapshot of the database: requests run while they are checked, and a
        # counter read before a reservation committed would not match the rows read after.
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("set transaction isolation level repeatable read, read only")
            return self._check_snapshot(ids, seen)

    def _check_snapshot(self, ids: list[int], seen: dict[str, int]) -> list[str]:
        from garden.models import Approval, Message
        from groups.models import (
            MAINTENANCE_CALLS,
            SYNTHESIS_CALLS,
            WORKING_CALLS,
            CallReservation,
            GroupRequest,
        )

        requests = {
            r.pk: r for r in GroupRequest.objects.filter(pk__in=ids).select_related("group")
        }
        reservations: dict[int, list[dict]] = defaultdict(list)
        for row in (
            CallReservation.objects.filter(request_id__in=ids)
            .order_by("id")
            .values("request_id", "purpose", "status", "reason", "fence")
        ):
            reservations[row["request_id"]].append(row)
        messages: dict[int, list[dict]] = defaultdict(list)
        for row in (
            Message.objects.filter(request_id__in=ids)
            .order_by("seq")
            .values(
                "id",
                "request_id",
                "speaker_kind",
                "speaker_agent_id",
                "kind",
                "step",
                "reply_to_call_id",
            )
        ):
            messages[row["request_id"]].append(row)
        pending = set(
            Approval.objects.filter(request_id__in=ids, status=Approval.Status.PENDING).values_list(
                "request_id", flat=True
            )
        )
        out = []
        for pk in ids:
            r, rows, msgs = requests[pk], reservations[pk], messages[pk]
            held = [x for x in rows if x["status"] != CallReservation.Status.RELEASED]
            for purpose, limit, counter in (
                ("working", WORKING_CALLS, r.working_reserved),
                ("synthesis", SYNTHESIS_CALLS, r.synthesis_reserved),
                ("maintenance", MAINTENANCE_CALLS, r.maintenance_reserved),
            ):
                n = sum(1 for x in held if x["purpose"] == purpose)
                if n > limit:
                    out.append(f"request {pk}: {n} {purpose} reservations held, limit {limit}")
                if n != counter:
                    out.append(
                        f"request {pk}: {purpose} counter {counter} but {n} reservations held"
                    )
            rejected = sum(
                1
                for x in rows
                if x["status"] == CallReservation.Status.RELEASED
                and x["reason"] == "PROVIDER_REJECTED"
            )
            dispatched = seen.get(self.tags[pk], 0)
            if dispatched > len(held) + rejected:
                out.append(
                    f"request {pk}: the provider received {dispatched} calls, only "
                    f"{len(held)} reservations held + {rejected} released on rejection"
                )
            owner = [m for m in msgs if m["speaker_kind"] == Message.SpeakerKind.OWNER]
            if len(owner) != 1 or r.message_id != owner[0]["id"]:
                out.append(
                    f"request {pk}: {len(owner)} owner messages (request.message={r.message_id})"
                )
            turns = Counter(
                (m["speaker_agent_id"], m["step"])
                for m in msgs
                if m["kind"] == Message.Kind.TURN and m["step"] is not None
            )
            out += [
                f"request {pk}: agent {a} has {n} turns at step {s}"
                for (a, s), n in turns.items()
                if n > 1
            ]
            answers = Counter(
                m["reply_to_call_id"]
                for m in msgs
                if m["kind"] == Message.Kind.TURN
                and m["reply_to_call_id"]
                and m["speaker_agent_id"] != r.group.coordinator_id
            )
            out += [
                f"request {pk}: ask {c} answered {n} times" for c, n in answers.items() if n > 1
            ]
            fences = [
                x["fence"] for x in rows if x["purpose"] != CallReservation.Purpose.MAINTENANCE
            ]
            if any(b <= a for a, b in itertools.pairwise(fences)):
                out.append(f"request {pk}: reservation fences not strictly increasing: {fences}")
            steps = [m["step"] for m in msgs if m["step"] is not None]
            if any(b < a for a, b in itertools.pairwise(steps)):
                out.append(f"request {pk}: message steps go back in seq order: {steps}")
            if r.is_finished and pk in pending:
                out.append(f"request {pk}: {r.state} with an approval still pending")
        return out

    def supervise(self, pool: list[Any], name: str) -> int:
        """Replace the workers of ``pool`` that exited, as a process supervisor would (compose
        ``restart:``, systemd ``Restart=``). Returns how many it replaced."""
        replaced = 0
        for i, worker in enumerate(pool):
            if not worker.alive:
                self.workers.remove(worker)
                pool[i] = self.spawn(name)
                replaced += 1
        return replaced

    def wait_finished(
        self, ids: list[int], bound: float, tick: Callable[[], None] | None = None
    ) -> list[str]:
        """Liveness: every request finished within ``bound`` seconds, with an outcome code."""
        from groups.models import GroupRequest

        deadline = time.monotonic() + bound
        while self.unfinished(ids) and time.monotonic() < deadline:
            if tick:
                tick()
            time.sleep(0.2)
        out = []
        for r in db_retry(lambda: list(GroupRequest.objects.filter(pk__in=ids))):
            if not r.is_finished:
                out.append(
                    f"request {r.pk}: still {r.state} after {bound:g} s (fence {r.fence}, "
                    f"completed {r.completed_fence}, working {r.working_reserved})"
                )
            elif not r.outcome_code or (r.state != GroupRequest.State.COMPLETED and not r.outcome):
                out.append(
                    f"request {r.pk}: {r.state} without an honest outcome "
                    f"({r.outcome_code!r}, {r.outcome!r})"
                )
        return out

    def outcomes(self, ids: list[int]) -> Counter:
        from groups.models import GroupRequest

        return Counter(
            f"{s}:{c}"
            for s, c in db_retry(
                lambda: list(
                    GroupRequest.objects.filter(pk__in=ids).values_list("state", "outcome_code")
                )
            )
        )

    def finish(self, result: Result, ids: list[int], *, bound: float, started: float) -> Result:
        """Drain with a clean worker, then the liveness and safety checks over all of ``ids``.
        Also counts the working calls the provider received without tools (see the report)."""
        rescuers = [self.spawn("rescuer-") for _ in range(2)]
        result.violations += self.wait_finished(ids, bound)
        result.violations += self.check_safety(ids)
        for worker in rescuers:
            worker.stop()
            self.workers.remove(worker)
        result.requests = ids
        result.outcomes = self.outcomes(ids)
        untooled = self.client.stats()["outcomes"].get("untooled", 0)
        result.details["untooled_calls"] = untooled - self._untooled
        self._untooled = untooled
        result.seconds = time.monotonic() - started
        return result


# --- scenarios ------------------------------------------------------------------------------


def scenario_kill(
    h: Harness, point: str, trials: int, *, rng: random.Random, bound: float = 120
) -> Result:
    """SIGKILL a worker at ``point`` of a step, ``trials`` times; a new worker (armed the same
    way) takes the next trial while the sweeper brings the stranded requests back."""
    result, started = Result(f"SIGKILL {point.replace('_', ' ')}"), time.monotonic()
    latency = 0.5 if point == "during_call" else 0.02
    env = (
        {}
        if point == "during_call"
        else {"GARDEN_FAULT_POINT": point, "GARDEN_FAULT_PROBABILITY": str(KILL_PROBABILITY)}
    )
    ids: list[int] = []
    for _ in range(trials):
        ids += h.new_requests(1, latency=latency)
        worker = h.spawn(f"kill-{point}-", env)
        deadline = time.monotonic() + 20
        if point == "during_call":
            while worker.alive and time.monotonic() < deadline:
                if h.calls_in_flight([worker]):
                    time.sleep(rng.uniform(0, latency * 0.6))
                    worker.signal(signal.SIGKILL)
                    break
                time.sleep(0.01)
        worker.wait_exit(max(0.0, deadline - time.monotonic()))
        if worker.killed:
            result.faults += 1
        else:
            worker.stop()
        h.workers.remove(worker)
        result.trials += 1
        result.violations += h.check_safety(ids)
    result.note = (
        f"probability {KILL_PROBABILITY} per hit"
        if point != "during_call"
        else f"killed 0-{latency * 0.6:g} s into a {latency:g} s call"
    )
    return h.finish(result, ids, bound=bound, started=started)


def scenario_stop(
    h: Harness,
    trials: int,
    *,
    rng: random.Random,
    workers: int = 5,
    active: int = 15,
    latency: float = 1.0,
    bound: float = 120,
) -> Result:
    """SIGSTOP a worker while the provider holds one of its calls; once another worker has
    taken each of its steps over (fence moved), SIGCONT it. The stale steps must not write:
    no message at their fence, their reservation settled as lost by the takeover."""
    from garden.models import Message
    from groups.models import CallReservation

    result, started = Result("SIGSTOP past lock TTL, then SIGCONT"), time.monotonic()
    # INFO, so each task's return value is logged: a stale step says 'stale'.
    pool = [h.spawn("stop-", loglevel="info") for _ in range(workers)]
    ids = h.new_requests(active, latency=latency)
    frozen: dict[Any, tuple[float, list[tuple[int, int]]]] = {}
    checks: list[tuple[float, list[tuple[int, int]]]] = []
    stale_steps = 0
    deadline = time.monotonic() + max(120.0, trials * 6.0)
    while (result.trials < trials or frozen or checks) and time.monotonic() < deadline:
        now = time.monotonic()
        for worker, (since, subjects) in list(frozen.items()):
            current = h.fences([pk for pk, _ in subjects])
            taken = all(current[pk][0] > fence for pk, fence in subjects)
            if taken or now - since > 30:
                if not taken:
                    result.violations.append(f"no takeover within 30 s of {subjects}")
                worker.signal(signal.SIGCONT)
                del frozen[worker]
                checks.append((now + 1.5, subjects))
        for due in [c for c in checks if c[0] <= now]:
            checks.remove(due)
            for pk, fence in due[1]:
                if db_retry(
                    lambda pk=pk, fence=fence: Message.objects.filter(
                        request_id=pk, step=fence
                    ).exists()
                ):
                    result.violations.append(
                        f"request {pk}: the stale step at fence {fence} wrote a message"
                    )
                row = db_retry(
                    lambda pk=pk, fence=fence: (
                        CallReservation.objects.filter(request_id=pk, fence=fence)
                        .values_list("status", "reason")
                        .first()
                    )
                )
                if row is not None and row != ("consumed", "ambiguous: step lost"):
                    result.violations.append(
                        f"request {pk}: reservation at stale fence {fence} is {row}"
                    )
            result.violations += h.check_safety(ids)
        running = [w for w in pool if w not in frozen]
        if result.trials < trials and len(running) > 1:
            calls = h.calls_in_flight(running)
            if calls:
                _, _, worker = rng.choice(calls)
                worker.signal(signal.SIGSTOP)
                mine = [(pk, port) for pk, port, w in calls if w is worker]
                # Only steps still inside their model call once stopped: they have written
                # nothing yet, so any message at their fence would be a stale write.
                inside = [pk for pk, port in mine if h.port_in_flight(pk, port)]
                current = h.fences(inside)
                subjects = [
                    (pk, current[pk][0]) for pk in inside if current[pk][1] < current[pk][0]
                ]
                if subjects:
                    frozen[worker] = (time.monotonic(), subjects)
                    result.trials += 1
                    result.faults += 1
                    stale_steps += len(subjects)
                else:
                    worker.signal(signal.SIGCONT)
        live = h.unfinished(ids)
        if len(live) < active and result.trials < trials:
            ids += h.new_requests(active - len(live), latency=latency)
        time.sleep(0.05)
    for worker in frozen:
        worker.signal(signal.SIGCONT)
    if result.trials < trials:
        result.violations.append(f"only {result.trials} of {trials} trials ran before the deadline")
    result = h.finish(result, ids, bound=bound, started=started)
    for worker in pool:
        worker.stop()
        h.workers.remove(worker)
    resumed = stale_returns([w.log_path for w in pool], longer_than=LOCK_TTL)
    result.details.update({"frozen_steps": stale_steps, "resumed_stale": resumed})
    result.note = (
        f"{stale_steps} steps frozen in a model call; {resumed} steps resumed after their lock "
        f"expired and gave up as stale (worker logs); lock TTL {LOCK_TTL} s, call {latency:g} s, "
        f"{workers} workers"
    )
    return result


def stale_returns(logs: list[Path], *, longer_than: float) -> int:
    """Steps that ran longer than the lock TTL and returned 'stale': the frozen ones, refused
    by the fence when they tried to record their reply."""
    pattern = re.compile(r"groups\.advance_request\[[^\]]+\] succeeded in ([0-9.]+)s: 'stale'")
    count = 0
    for path in logs:
        for match in pattern.finditer(Path(path).read_text(errors="replace")):
            count += float(match.group(1)) > longer_than
    return count


def scenario_redis(
    h: Harness, redis: RedisServer, trials: int, *, rng: random.Random, bound: float = 90
) -> Result:
    """Restart Redis (it keeps nothing: queued tasks and locks are gone) during requests."""
    result, started = Result("restart Redis (broker + locks)"), time.monotonic()
    pool = [h.spawn("redis-") for _ in range(2)]
    ids: list[int] = []
    exited = 0

    def supervise() -> None:
        nonlocal exited
        exited += h.supervise(pool, "redis-")

    for _ in range(trials):
        batch = h.new_requests(6, latency=0.2)
        ids += batch
        time.sleep(rng.uniform(0.5, 2.0))
        redis.restart()
        result.faults += 1
        result.trials += 1
        result.violations += h.wait_finished(batch, bound, tick=supervise)
        result.violations += h.check_safety(ids)
    # kombu 5.7 on Redis: the consumer's reconnect dies in restore_unacked ("Unrecoverable
    # error: 'NoneType' object has no attribute 'hostname'") and the worker exits.
    result.note = (
        f"{'the shared' if redis.shared else 'a private'} redis-server on :{redis.port}; "
        f"{exited} workers exited on a restart and were restarted by the harness's supervisor"
    )
    result = h.finish(result, ids, bound=bound, started=started)
    for worker in pool:
        worker.stop()
        h.workers.remove(worker)
    return result


def terminate_backends(database: str) -> int:
    import psycopg

    with psycopg.connect(f"{pg_base()}/postgres", autocommit=True) as conn:
        return len(
            conn.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity where datname = %s "
                "and pid <> pg_backend_pid()",
                [database],
            ).fetchall()
        )


def scenario_pg(
    h: Harness, database: str, trials: int, *, rng: random.Random, bound: float = 90
) -> Result:
    """Terminate every backend of the harness database mid-step (workers' and the harness's)."""
    result, started = Result("drop PostgreSQL connections"), time.monotonic()
    pool = [h.spawn("pg-") for _ in range(2)]
    ids: list[int] = []
    dropped = exited = 0

    def supervise() -> None:
        nonlocal exited
        exited += h.supervise(pool, "pg-")

    for _ in range(trials):
        batch = h.new_requests(6, latency=0.1)
        ids += batch
        time.sleep(rng.uniform(0.3, 1.5))
        dropped += terminate_backends(database)
        result.faults += 1
        result.trials += 1
        result.violations += h.wait_finished(batch, bound, tick=supervise)
        result.violations += h.check_safety(ids)
    result.note = f"{dropped} backends terminated; {exited} workers exited"
    result = h.finish(result, ids, bound=bound, started=started)
    for worker in pool:
        worker.stop()
        h.workers.remove(worker)
    return result


PROVIDER_MIXES = (
    {"p_timeout": 0.1, "p_reset": 0.1, "p_429": 0.1, "p_500": 0.1},
    {"p_429": 0.5},
    {"p_timeout": 0.2, "p_reset": 0.2},
    {"p_500": 0.3, "p_429": 0.2},
)


def scenario_provider(
    h: Harness, requests: int, *, rng: random.Random, bound: float = 150
) -> Result:
    """A provider that times out (1 s client timeout, held 3 s), resets, answers 429 and 500."""
    result, started = Result("provider timeouts, resets, 429, 500"), time.monotonic()
    pool = [h.spawn("provider-") for _ in range(2)]
    ids: list[int] = []
    for i in range(requests):
        mix = PROVIDER_MIXES[i % len(PROVIDER_MIXES)]
        ids += h.new_requests(1, latency=0.05, timeout=1.0, hang=3.0, retry_after_ms=50, **mix)
        result.trials += 1
    result.violations += h.wait_finished(ids, bound)
    result.violations += h.check_safety(ids)
    stats = h.client.stats()["outcomes"]
    result.faults = sum(stats.get(k, 0) for k in ("timeout", "reset", "429", "500"))
    result.note = "mixes: " + "; ".join(
        ",".join(f"{k[2:]}={v:g}" for k, v in m.items()) for m in PROVIDER_MIXES
    )
    result = h.finish(result, ids, bound=bound, started=started)
    for worker in pool:
        worker.stop()
        h.workers.remove(worker)
    return result


# --- the run --------------------------------------------------------------------------------


def table(results: list[Result]) -> str:
    lines = [
        "| scenario | trials | faults injected | requests | outcomes | violations | calls without tools "
        "| seconds | notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(r.outcomes.items()))
        lines.append(
            f"| {r.scenario} | {r.trials} | {r.faults} | {len(r.requests)} | {outcomes} | "
            f"{len(r.violations)} | {r.details.get('untooled_calls', 0)} | {r.seconds:.0f} | {r.note} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Fault harness for the group loop (see the module docstring)."
    )
    parser.add_argument(
        "--trials",
        type=int,
        default=200,
        help="SIGKILL trials (split over the five points); the other scenarios scale with it",
    )
    parser.add_argument("--only", default="kill,stop,redis,pg,provider")
    parser.add_argument(
        "--shared-redis",
        action="store_true",
        help=f"use and restart the Redis on 127.0.0.1:6379 (db {REDIS_DB}) instead of a private one",
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--zygote", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.zygote:
        zygote_main()
        return

    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    only = set(args.only.split(","))
    redis = RedisServer(shared=args.shared_redis)
    env = worker_env(f"{pg_base()}/{DATABASE}", redis.url)
    use_services(database=DATABASE, redis_url=redis.url)
    ensure_database(DATABASE)
    subprocess.run([sys.executable, "manage.py", "flush", "--noinput"], cwd=ROOT, check=True)
    import django

    django.setup()
    from bench.fake_provider import FakeProvider

    provider = FakeProvider(seed=seed).start()
    log_dir = Path(tempfile.mkdtemp(prefix="garden-faults-"))
    zygote = Zygote(log_dir, env)
    h = Harness(provider_url=provider.url, spawn=zygote.spawn)
    print(machine_line())
    print(f"seed {seed}; database {DATABASE}; worker logs in {log_dir}")
    if redis.shared:
        print(
            f"Redis: the SHARED redis-server on 127.0.0.1:6379, db {REDIS_DB} — restarting it wipes "
            "every db: run this only when nothing else needs Redis."
        )
    else:
        print(
            f"Redis: a private redis-server on 127.0.0.1:{redis.port}, db {REDIS_DB} (the shared one "
            "is never touched)."
        )
    print(
        f"workers: threads pool, {h.concurrency} threads, lock TTL {LOCK_TTL} s; sweeper every "
        f"{SWEEP_INTERVAL} s on requests quiet for {SWEEP_AGE} s",
        flush=True,
    )
    results: list[Result] = []
    h.start_sweeper()
    try:
        if "kill" in only:
            per_point = max(1, args.trials // len(POINTS))
            for point in POINTS:
                results.append(scenario_kill(h, point, per_point, rng=rng))
                _progress(results[-1])
        if "stop" in only:
            results.append(scenario_stop(h, max(1, args.trials // 2), rng=rng))
            _progress(results[-1])
        if "redis" in only:
            results.append(scenario_redis(h, redis, max(2, args.trials // 40), rng=rng))
            _progress(results[-1])
        if "pg" in only:
            results.append(scenario_pg(h, DATABASE, max(2, args.trials // 20), rng=rng))
            _progress(results[-1])
        if "provider" in only:
            results.append(scenario_provider(h, max(8, args.trials // 5), rng=rng))
            _progress(results[-1])
    finally:
        h.stop_sweeper()
        h.stop_workers()
        zygote.close()
        provider.stop()
        redis.close()
    print()
    print(table(results))
    violations = [v for r in results for v in r.violations]
    print(
        f"\n{sum(r.trials for r in results)} trials, {sum(r.faults for r in results)} faults injected, "
        f"{sum(len(r.requests) for r in results)} requests, {len(violations)} violations; "
        f"sweeper errors while services were cut: {h.sweep_errors}"
    )
    for v in violations:
        print(f"VIOLATION: {v}")
    sys.exit(1 if violations else 0)


def _progress(r: Result) -> None:
    print(
        f"  {r.scenario}: {r.trials} trials, {r.faults} faults, {len(r.requests)} requests, "
        f"{len(r.violations)} violations, {r.seconds:.0f} s",
        flush=True,
    )
    for v in r.violations[:10]:
        print(f"    VIOLATION: {v}", flush=True)


if __name__ == "__main__":
    main()
