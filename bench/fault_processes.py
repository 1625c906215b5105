"""Process control for the fault harness: the Celery workers it starts (exec'd, or forked from a
preloaded zygote) and signals, the redis-server it restarts, and the PostgreSQL backends it
terminates."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.support import CAPACITY_ENV, ROOT, pg_base
from bench.workers import Worker, die_with_parent

# Overridable, so that two runs on one machine never share (or flush) one Redis db.
REDIS_DB = int(os.environ.get("FAULTS_REDIS_DB", "4"))
LOCK_TTL = 2  # seconds, for the harness workers
# A worker SIGSTOPped inside a transaction loses its session after this many seconds, so its
# row locks never stall the workers taking its steps over.
IDLE_IN_TRANSACTION = 4


def worker_env(database_url: str, redis_url: str, *, pooler: bool = False) -> dict[str, str]:
    """Environment of every harness worker (and of the zygote that forks them); ``pooler``:
    ``database_url`` is a transaction pooler's (GARDEN_DB_TRANSACTION_POOLER), and the idle
    timeout the database's own (``idle_timeout_on_database``)."""
    return {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "GARDEN_LOCK_TTL_SECONDS": str(LOCK_TTL),
        "GARDEN_DB_POOL_MAX": "4",
        "GARDEN_DB_IDLE_IN_TRANSACTION_SECONDS": str(IDLE_IN_TRANSACTION),
        "GARDEN_DB_TRANSACTION_POOLER": "1" if pooler else "0",
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
            # The zygote is bench/faults.py itself, in its hidden --zygote mode.
            [sys.executable, str(ROOT / "bench" / "faults.py"), "--zygote"],
            cwd=ROOT,
            env={**os.environ, **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=die_with_parent,
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
    import groups.domain.bounding
    import groups.domain.projection  # noqa: F401
    from config.celery import app

    app.loader.import_default_modules()
    # groups.faults reads GARDEN_FAULT_POINT at the first point a process reaches, so each
    # forked child reads its own env: the zygote itself must never have reached one.
    from groups import faults

    assert faults._armed is None
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
                die_with_parent()
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


# --- PostgreSQL -----------------------------------------------------------------------------


def terminate_backends(database: str, *, server: str | None = None) -> int:
    """Terminate every backend on ``database`` (the workers' and the harness's own, or, behind
    PgBouncer, its server sessions), asked of the PostgreSQL server at ``server`` (default: the
    one DATABASE_URL names); returns how many."""
    import psycopg

    with psycopg.connect(f"{server or pg_base()}/postgres", autocommit=True) as conn:
        return len(
            conn.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity where datname = %s "
                "and pid <> pg_backend_pid()",
                [database],
            ).fetchall()
        )


def idle_timeout_on_database(database: str, *, server: str, seconds: int | None) -> None:
    """Behind a transaction pooler no client sends the idle-in-transaction timeout: set it on
    ``database`` itself (``seconds``; None takes it off), for every server session made after."""
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        if seconds is None:
            conn.execute(f'alter database "{database}" reset idle_in_transaction_session_timeout')
        else:
            conn.execute(
                f'alter database "{database}" set idle_in_transaction_session_timeout = '
                f"'{int(seconds)}s'"
            )
