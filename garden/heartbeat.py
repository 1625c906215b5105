"""Workers the web side can see: each Celery worker process writes a beat (a WorkerBeat row)
every GARDEN_WORKER_BEAT_SECONDS from a thread of its own, and removes it when it stops warm.
A site with no fresh beat has no live worker: the API says so on a request that waits
(``waiting_for: "worker"``) and the room shows it. Each beat also asks whether Redis lost
what it held (garden/lost_sends.py)."""

from __future__ import annotations

import logging
import os
import threading
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from garden import lost_sends, metrics
from garden.models import WorkerBeat

log = logging.getLogger(__name__)

_beating: dict[str, tuple[threading.Event, threading.Thread]] = {}


def beat(*, hostname: str, concurrency: int = 0, embedded: bool = False) -> None:
    """Write this worker's beat now (its row, made on the first beat)."""
    now = timezone.now()
    updated = WorkerBeat.objects.filter(hostname=hostname).update(
        beat_at=now, pid=os.getpid(), concurrency=concurrency, embedded=embedded
    )
    if not updated:
        WorkerBeat.objects.update_or_create(
            hostname=hostname,
            defaults={
                "pid": os.getpid(),
                "concurrency": concurrency,
                "embedded": embedded,
                "started_at": now,
                "beat_at": now,
            },
        )


def start(*, hostname: str, concurrency: int = 0, embedded: bool = False) -> None:
    """Beat for ``hostname`` until ``stop``: once at once, then every
    GARDEN_WORKER_BEAT_SECONDS, from a daemon thread."""
    if hostname in _beating:
        return
    stopped = threading.Event()

    def run() -> None:
        first = True
        while not stopped.is_set():
            try:
                beat(hostname=hostname, concurrency=concurrency, embedded=embedded)
            except Exception:  # the database away for a moment: the next beat tries again
                log.warning("worker beat of %s failed", hostname, exc_info=True)
                metrics.worker_beat(False)
            else:
                metrics.worker_beat(True)
            try:
                lost_sends.check_epoch(first=first)
                first = False
            except Exception:  # Redis away: the next beat asks again
                log.info("could not read the Redis epoch", exc_info=True)
            finally:
                connection.close()
            stopped.wait(settings.GARDEN_WORKER_BEAT_SECONDS)

    thread = threading.Thread(target=run, name=f"garden-beat-{hostname}", daemon=True)
    _beating[hostname] = (stopped, thread)
    thread.start()


def stop(*, hostname: str) -> None:
    """Stop beating and remove the row: a worker that stops warm is gone at once."""
    beating = _beating.pop(hostname, None)
    if beating is not None:
        stopped, thread = beating
        stopped.set()
        thread.join(10)  # a beat in flight is written before the row goes
    try:
        WorkerBeat.objects.filter(hostname=hostname).delete()
    except Exception:
        log.warning("could not remove the beat of %s", hostname, exc_info=True)


def workers_alive() -> bool:
    """Whether any worker has beaten within GARDEN_WORKER_STALE_SECONDS."""
    since = timezone.now() - timedelta(seconds=settings.GARDEN_WORKER_STALE_SECONDS)
    return WorkerBeat.objects.filter(beat_at__gte=since).exists()


def on_worker_ready(sender: Any = None, **_: Any) -> None:
    """celery's worker_ready (sent with the consumer)."""
    controller = getattr(sender, "controller", None)
    start(
        hostname=sender.hostname,
        concurrency=getattr(controller, "concurrency", 0) or 0,
        embedded=bool(getattr(controller, "garden_embedded", False)),
    )


def on_worker_shutdown(sender: Any = None, **_: Any) -> None:
    """celery's worker_shutdown (sent with the worker controller)."""
    hostname = getattr(sender, "hostname", None)
    if hostname:
        stop(hostname=hostname)


# Set when this process's worker begins a warm shutdown: a delivery that could carry its work
# on in place (a request's next step) hands it to the broker instead, so it ends promptly.
_shutting_down = threading.Event()


def on_worker_shutting_down(sender: Any = None, **_: Any) -> None:
    """celery's worker_shutting_down (the shutdown has begun)."""
    _shutting_down.set()


def shutting_down() -> bool:
    """Whether this process's worker has begun to shut down."""
    return _shutting_down.is_set()
