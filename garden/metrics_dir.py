"""Where the processes of one host keep their Prometheus samples (GARDEN_METRICS_DIR:
prometheus_client's multiprocess mode), set up when this module is imported, before any
metric exists; and whether metrics are on at all (garden/metrics.py)."""

from __future__ import annotations

import atexit
import glob
import logging
import os
from typing import Any

from django.conf import settings
from prometheus_client import multiprocess, values

from garden.processes import alive

log = logging.getLogger(__name__)

DIRECTORY: str = settings.GARDEN_METRICS_DIR
ENABLED: bool = bool(settings.GARDEN_METRICS_TOKEN or DIRECTORY or settings.GARDEN_METRICS_PORT)


def _forget_the_dead(directory: str) -> None:
    """Drop the live gauges (slots held, sockets open) of processes that are gone, and of an
    earlier process that had this one's pid; their counters stay, so totals never go down."""
    for path in glob.glob(os.path.join(directory, "gauge_live*_*.db")):
        pid = path.rsplit("_", 1)[1].removesuffix(".db")
        if pid.isdigit() and (int(pid) == os.getpid() or not alive(int(pid))):
            multiprocess.mark_process_dead(int(pid), directory)


def process_stopped(*_: Any, **__: Any) -> None:
    """This process stops: its live gauges leave the sum (atexit, and Celery's
    worker_process_shutdown for a prefork child)."""
    if DIRECTORY:
        multiprocess.mark_process_dead(os.getpid(), DIRECTORY)


def usable_directory(directory: str) -> str:
    """Why the metrics' directory cannot be used ('' when it can): made if missing, written by
    this process."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        return str(exc)
    return "" if os.access(directory, os.W_OK | os.X_OK) else f"{directory} is not writable"


if DIRECTORY and (_unusable := usable_directory(DIRECTORY)):
    # A process must start whatever the directory is (the system check says what is wrong);
    # this one keeps its samples to itself.
    log.error("metrics: GARDEN_METRICS_DIR cannot be used: %s", _unusable)
    DIRECTORY = ""
if DIRECTORY:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = DIRECTORY
    # prometheus_client picks its value class when first imported; a process whose environment
    # did not name the directory then gets the multiprocess one here, before any metric exists.
    if values.ValueClass.__name__ != "MmapedValue":
        values.ValueClass = values.MultiProcessValue()
    _forget_the_dead(DIRECTORY)
    atexit.register(process_stopped)
