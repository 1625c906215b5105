"""Serving the dashboard from one process: the ASGI application with its static files, daphne
in a background thread (browser tests, screenshots), and the embedded Celery worker thread.

On the embedded default the channel layer is in memory, so the worker that pushes a room's
events must live in the process whose daphne holds the room's websocket; hence one process.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import current_app


def asgi_application() -> Any:
    """config.asgi's application, with static files served (the admin's and the dashboard's)."""
    from channels.routing import get_default_application
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    return ASGIStaticFilesHandler(get_default_application())


def endpoints(host: str, port: int) -> list[str]:
    from daphne.endpoints import build_endpoint_description_strings

    return build_endpoint_description_strings(host=host, port=port)


@contextmanager
def embedded_worker(*, concurrency: int = 4, loglevel: str = "WARNING") -> Iterator[Any]:
    """A real Celery worker (consumer, thread pool, acks) in a thread of this process, on the
    configured broker; stopped with a warm shutdown when the block ends."""
    from celery.contrib.testing.worker import start_worker

    app = current_app._get_current_object()  # the project's app (config.celery)
    with start_worker(
        app,
        pool="threads",
        concurrency=concurrency,
        perform_ping_check=False,
        loglevel=loglevel,
        shutdown_timeout=30,
    ):
        yield app


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
