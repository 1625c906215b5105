"""Child processes a test stops as a person would, with SIGINT (Ctrl-C).

A test run started in the background by a non-interactive shell (``make test`` runs the
dashboard's tests beside the main run) ignores SIGINT, and a child inherits that: Python then
installs no KeyboardInterrupt, and the child never hears the test's Ctrl-C. ``interruptible``,
as a child's ``preexec_fn``, gives it SIGINT's default back before it starts."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(command: list[str], env: dict[str, str], *, apart: bool = False) -> subprocess.Popen:
    """``command`` run from the checkout's root with ``env``, its output (stdout and stderr
    together, or ``apart``) readable as text, stoppable with SIGINT."""
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if apart else subprocess.STDOUT,
        text=True,
        preexec_fn=interruptible,
    )


def manage(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """``python manage.py *args`` run to its end from the checkout's root with ``env``, its
    stdout and stderr kept apart as text."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
