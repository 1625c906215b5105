"""Start and stop a real Celery worker process for the embedded default (demo, tests).

The worker is the same ``celery -A config worker`` a deployment runs; on the embedded default
it reads tasks from the filesystem transport under var/.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_counter = itertools.count()


@contextmanager
def running_worker(
    *,
    pool: str = "solo",
    concurrency: int = 1,
    env: dict[str, str] | None = None,
    queues: str = "celery",
    loglevel: str = "warning",
    log_path: Path | None = None,
) -> Iterator[subprocess.Popen]:
    """Run ``celery worker`` as a child process for the block; its output goes to ``log_path``
    (or is inherited when None). Stopped with SIGTERM (warm shutdown) on exit."""
    cmd = [
        sys.executable,
        "-m",
        "celery",
        "--quiet",
        "-A",
        "config",
        "worker",
        f"--pool={pool}",
        f"--hostname=garden-{os.getpid()}-{next(_counter)}@%h",
        f"--concurrency={concurrency}",
        "-Q",
        queues,
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        f"--loglevel={loglevel}",
    ]
    log = open(log_path, "ab") if log_path else None
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=log,
        stderr=subprocess.STDOUT if log else None,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if log:
            log.close()
