"""A site served the way it is deployed, in child processes of the test: daphne serving
config.asgi and two Celery worker processes (threads pool), on the test's database and the
Redis its environment names; each process's output in a log file of its own (shown when the
test fails)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.mcp_server import free_port
from tests.support.processes import ROOT
from tests.support.workers import wait_for


@dataclass
class Site:
    base: str
    port: int
    folder: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text()


def _spawn(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    out = open(log, "w")
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


@contextmanager
def served_site(folder: Path, env: dict[str, str], workers: int = 2) -> Iterator[Site]:
    """daphne and ``workers`` workers (``w1``, ``w2``, …) with ``env``, ready (``/readyz`` 200)
    when it yields; each stopped with SIGTERM at the end, as an orchestrator stops it."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    site = Site(base=f"http://127.0.0.1:{port}", port=port, folder=folder)
    daphne = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    site.procs["web"] = _spawn([*daphne, "config.asgi:application"], env, folder / "web.log")
    for n in range(1, workers + 1):
        worker = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=threads"]
        options = ["--concurrency=2", "-n", f"w{n}@%h", "--loglevel=warning"]
        site.procs[f"w{n}"] = _spawn([*worker, *options], env, folder / f"w{n}.log")

    def ready() -> bool:
        try:
            return httpx.get(f"{site.base}/readyz", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(ready, timeout=60, interval=0.2)
        yield site
    finally:
        for proc in site.procs.values():
            proc.terminate()
        for proc in site.procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        for name in site.procs:  # shown when the test fails
            print(f"--- {name}\n" + site.log(name)[-4000:])
