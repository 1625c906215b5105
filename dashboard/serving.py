"""Serving the dashboard from one process: the ASGI application with its static files, daphne
in a background thread (browser tests, screenshots), and the embedded Celery worker and beat.

On the embedded default the channel layer is in memory, so the worker that pushes a room's
events must live in the process whose daphne holds the room's websocket; hence one process.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from celery import current_app

log = logging.getLogger(__name__)


def asgi_application() -> Any:
    """config.asgi's application, with static files served (the admin's and the dashboard's)."""
    from channels.routing import get_default_application
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    return ASGIStaticFilesHandler(get_default_application())


def endpoints(host: str, port: int) -> list[str]:
    from daphne.endpoints import build_endpoint_description_strings

    return build_endpoint_description_strings(host=host, port=port)


class EmbeddedWorker:
    """The embedded default's Celery worker (consumer, thread pool, acks) and beat, in threads
    of this process, on the configured broker.

    On entry it sweeps every request a killed process left running (the embedded layout's
    locks die with their process, so nothing live is taken from anyone), then beat runs the
    sweeper, the purge and missions' schedule here, as a separate beat does in a deployment.
    A worker that stops on its own (Celery logs "Unrecoverable error" and returns) is started
    again; after ``restarts`` stops within ``window`` seconds, ``give_up`` is called — by
    default the process exits loudly, never serving pages that no worker answers.
    """

    def __init__(
        self,
        *,
        concurrency: int = 4,
        loglevel: str = "WARNING",
        beat: bool = True,
        sweep_on_start: bool = True,
        restarts: int = 3,
        window: float = 60.0,
        give_up: Callable[[str], None] | None = None,
    ) -> None:
        self.app = current_app._get_current_object()  # the project's app (config.celery)
        self.concurrency, self.loglevel, self.beat_wanted = concurrency, loglevel, beat
        self.sweep_on_start = sweep_on_start
        self.restarts, self.window = restarts, window
        self.give_up = give_up or _exit_loudly
        self.worker: Any = None
        self.started = 0
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._beat: Any = None

    def __enter__(self) -> EmbeddedWorker:
        from celery.beat import EmbeddedService
        from django.conf import settings

        from groups.services.approvals import sweep_stranded

        self.app.finalize()
        self.app.set_current()
        self._thread = threading.Thread(
            target=self._supervise, name="garden-worker-supervisor", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the embedded worker did not start within 30 s")
        swept = sweep_stranded(older_than_seconds=0) if self.sweep_on_start else {}
        if any(swept.values()):
            log.warning("requests a stopped process left behind, put back on their way: %s", swept)
        if self.beat_wanted:
            self._beat = EmbeddedService(
                self.app, thread=True, scheduler_cls=settings.CELERY_BEAT_SCHEDULER
            )
            self._beat.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._stopping.set()
        if self._beat is not None:
            self._beat.stop()
        if self.worker is not None:
            self.worker.stop(in_sighandler=False)
        if self._thread is not None:
            self._thread.join(30)

    def _supervise(self) -> None:
        from celery import signals
        from celery.worker import WorkController

        ready = self._ready

        class Worker(WorkController):
            garden_embedded = True

            def on_consumer_ready(self, consumer: Any) -> None:
                signals.worker_ready.send(sender=consumer)  # as celery's own worker does
                ready.set()

        stops: deque[float] = deque()
        while not self._stopping.is_set():
            self.worker = Worker(
                app=self.app,
                pool="threads",
                concurrency=self.concurrency,
                loglevel=self.loglevel,
                without_heartbeat=True,
                without_mingle=True,
                without_gossip=True,
            )
            self.started += 1
            self.worker.start()  # returns when the worker stops
            if self._stopping.is_set():
                return
            now = time.monotonic()
            stops.append(now)
            while stops and now - stops[0] > self.window:
                stops.popleft()
            if len(stops) > self.restarts:
                self.give_up(
                    f"the embedded worker stopped {len(stops)} times within "
                    f"{self.window:g} s; see the log above for why"
                )
                return
            log.error("the embedded worker stopped on its own; starting it again")
            time.sleep(1.0)


def _exit_loudly(why: str) -> None:
    log.critical("garden stops: %s", why)
    sys.stderr.write(f"\ngarden stops: {why}. Start it again once the cause is fixed.\n")
    sys.stderr.flush()
    os._exit(70)  # EX_SOFTWARE: no half-alive server


class ThreadedDaphne:
    """daphne on a free port in a daemon thread. Twisted's reactor runs once per process, so
    start one of these per process and reuse it."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self._ready = threading.Event()
        self.server: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 10.0) -> ThreadedDaphne:
        from daphne.server import Server

        self.server = Server(
            application=asgi_application(),
            endpoints=endpoints(self.host, self.port),
            signal_handlers=False,
            verbosity=0,
            ready_callable=self._ready.set,
        )
        threading.Thread(target=self.server.run, name="daphne", daemon=True).start()
        if not self._ready.wait(timeout) or not self.server.listening_addresses:
            raise RuntimeError(f"daphne did not start listening on {self.host}:{self.port}")
        self.port = self.server.listening_addresses[0][1]
        return self

    def stop(self) -> None:
        from twisted.internet import reactor

        if reactor.running:
            reactor.callFromThread(reactor.stop)
