"""Fault-injection points for the crash harness (bench/faults.py): a worker started with
``GARDEN_FAULT_POINT=<name>`` SIGKILLs itself when a step reaches that point.

The environment is read once, at import. Unset (always, outside the harness), ``fault_point``
is a function that returns at once: nothing is measurable on the step's path.
"""

from __future__ import annotations

import os
import random
import signal

POINTS = ("before_reserve", "before_dispatch", "after_reply", "after_write")

_POINT = os.environ.get("GARDEN_FAULT_POINT", "")
_PROBABILITY = float(os.environ.get("GARDEN_FAULT_PROBABILITY", "") or 1.0)


def _noop(name: str) -> None:
    return None


def _armed(name: str) -> None:
    if name == _POINT and (_PROBABILITY >= 1.0 or random.random() < _PROBABILITY):
        # SIGKILL, not an exception: nothing of the step's own cleanup may run, as on a
        # power cut or an OOM kill.
        os.kill(os.getpid(), signal.SIGKILL)


fault_point = _armed if _POINT else _noop
