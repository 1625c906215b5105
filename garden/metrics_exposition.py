"""How a scrape reads this host's Prometheus samples: the text exposition (the multiprocess
files added up, or this process's own, with the database-read gauges), the bearer /metrics
asks for, and the port a worker with GARDEN_METRICS_PORT serves them on."""

from __future__ import annotations

import hmac
import logging
import threading
from collections.abc import Callable, Iterator
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.conf import settings
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import Metric

from garden.metrics import REGISTRY, ScrapeGauges
from garden.metrics_dir import DIRECTORY

log = logging.getLogger(__name__)


def exposition(*, database: bool = True) -> bytes:
    """This host's samples in Prometheus' text format: the multiprocess files added up (or
    this process's own), with the database-read gauges when ``database``."""
    if DIRECTORY:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=DIRECTORY)
    else:
        registry = CollectorRegistry()
        registry.register(_Registered())
    if database:
        registry.register(ScrapeGauges())
    return generate_latest(registry)


class _Registered:
    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


CONTENT_TYPE = CONTENT_TYPE_LATEST


def bearer_allowed(authorization: str | None) -> bool:
    """Whether an Authorization header carries GARDEN_METRICS_TOKEN (constant-time)."""
    token = settings.GARDEN_METRICS_TOKEN
    scheme, _, given = (authorization or "").partition(" ")
    return (
        bool(token)
        and scheme.lower() == "bearer"
        and hmac.compare_digest(given.strip().encode(), token.encode())
    )


# A port of its own (a worker host with no web process): GARDEN_METRICS_PORT. With GARDEN_METRICS_TOKEN set it asks for the bearer too.


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _app(*, database: bool) -> Callable:
    def app(environ: dict, start_response: Callable) -> list[bytes]:
        if environ.get("PATH_INFO", "/") not in ("/", "/metrics"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found\n"]
        if settings.GARDEN_METRICS_TOKEN and not bearer_allowed(environ.get("HTTP_AUTHORIZATION")):
            start_response("401 Unauthorized", [("WWW-Authenticate", "Bearer")])
            return [b""]
        body = exposition(database=database)
        start_response("200 OK", [("Content-Type", CONTENT_TYPE)])
        return [body]

    return app


_serving: dict[int, WSGIServer] = {}


def serve(*, port: int, addr: str = "", database: bool = False) -> WSGIServer:
    """Serve this host's samples on ``addr:port`` from a daemon thread (once per port)."""
    if port in _serving:
        return _serving[port]
    server = make_server(
        addr or settings.GARDEN_METRICS_ADDR,
        port,
        _app(database=database),
        server_class=_Server,
        handler_class=_Quiet,
    )
    _serving[port] = server
    threading.Thread(target=server.serve_forever, name="garden-metrics", daemon=True).start()
    return server


def on_worker_ready(sender: Any = None, **_: Any) -> None:
    """celery's worker_ready: a worker with GARDEN_METRICS_PORT serves its samples there."""
    if settings.GARDEN_METRICS_PORT:
        try:
            serve(port=settings.GARDEN_METRICS_PORT)
        except OSError:
            log.error("metrics: cannot listen on port %s", settings.GARDEN_METRICS_PORT)
