"""Real ``celery worker`` processes for the benchmarks and the fault harness, and what /proc
says about them: their process tree, memory, CPU time and which one owns a socket."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.support import ROOT

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
            preexec_fn=die_with_parent,
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


def die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the bench that started it dies (Linux), so an
    interrupted run leaves no worker behind consuming from its Redis db."""
    if _prctl is not None:
        _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], ProcessLookupError | PermissionError)


# --- /proc ------------------------------------------------------------------------------------


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


def socket_owner(local_port: int, pids: list[int], remote_port: int | None = None) -> int | None:
    """Which of ``pids`` (or their descendants) owns the TCP socket bound to ``local_port``
    (and connected to ``remote_port``: Linux gives one ephemeral port to connections to
    different servers, so a worker's database connection may share the port of another
    worker's model call)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) != local_port:
                continue
            if remote_port is None or int(fields[2].rsplit(":", 1)[1], 16) == remote_port:
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
