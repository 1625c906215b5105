"""Fault-injection points for the crash harness (bench/faults.py): a worker started with
``GARDEN_FAULT_POINT=<name>`` SIGKILLs itself when a step reaches that point.

The environment is read once per process, at the first point reached (so a worker forked
from a preloaded parent reads its own). Unset — always, outside the harness — a point costs
one comparison.
"""

from __future__ import annotations

import os
import random
import signal

POINTS = ("before_reserve", "before_dispatch", "after_reply", "after_write")

_armed: tuple[str, float] | None = None


def fault_point(name: str) -> None:
    global _armed
    if _armed is None:
        _armed = (
            os.environ.get("GARDEN_FAULT_POINT", ""),
            float(os.environ.get("GARDEN_FAULT_PROBABILITY", "") or 1.0),
        )
    point, probability = _armed
    if point and name == point and (probability >= 1.0 or random.random() < probability):
        # SIGKILL, not an exception: nothing of the step's own cleanup may run, as on a
        # power cut or an OOM kill.
        os.kill(os.getpid(), signal.SIGKILL)
