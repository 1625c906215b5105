"""How a scrape reads this host's Prometheus samples: the text exposition (the multiprocess
files added up, or this process's own, with the database-read gauges), the bearer /metrics
asks for (and the hold on a client address that keeps guessing it), and the port a worker with
GARDEN_METRICS_PORT serves them on."""

from __future__ import annotations

import hmac
import ipaddress
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import Metric

from garden.attempts import count_failure
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


@dataclass(frozen=True)
class Refusal:
    """Why a scrape is refused: 401 no bearer, 403 a wrong one, 429 its address is held
    (``retry_after`` seconds)."""

    status: int
    retry_after: int = 0


def bearer_refusal(authorization: str | None, *, address: str | None) -> Refusal | None:
    """None when ``authorization`` carries GARDEN_METRICS_TOKEN; else why not. A client
    address that sent GARDEN_METRICS_FAILURE_LIMIT wrong bearers within
    GARDEN_METRICS_FAILURE_WINDOW_SECONDS is held for a window: 429 before the token is
    compared, whatever it sends. Counted in the cache, so the web and the workers sharing its
    Redis count one address together."""
    held = _held_for(address)
    if held:
        return Refusal(429, held)
    if not authorization:
        return Refusal(401)
    if bearer_allowed(authorization):
        return None
    _failed(address)
    return Refusal(403)


def _hold_key(address: str) -> str:
    return f"metrics:bearer-hold:{address}"


def _held_for(address: str | None) -> int:
    """Whole seconds ``address`` is still held (0: it is not)."""
    if not address or settings.GARDEN_METRICS_FAILURE_LIMIT <= 0:
        return 0
    try:
        until = cache.get(_hold_key(address))
    except Exception:  # the cache away must not take the scrape with it: the token still holds
        log.warning("metrics: the bearer hold cannot be read", exc_info=True)
        return 0
    return max(0, math.ceil(until - time.time())) if until is not None else 0


def _failed(address: str | None) -> None:
    limit = settings.GARDEN_METRICS_FAILURE_LIMIT
    if not address or limit <= 0:
        return
    window = max(1, settings.GARDEN_METRICS_FAILURE_WINDOW_SECONDS)
    try:
        if count_failure(f"metrics:bearer-fails:{address}", window_seconds=window) >= limit:
            cache.set(_hold_key(address), time.time() + window, window)
    except Exception:
        log.warning("metrics: a wrong bearer cannot be counted", exc_info=True)


# A port of its own (a worker host with no web process): GARDEN_METRICS_PORT. With
# GARDEN_METRICS_TOKEN set it asks for the bearer too; without it, it serves a loopback address
# only (what reaches the machine from outside never reads it unasked).


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
        if settings.GARDEN_METRICS_TOKEN:
            # No proxy in front of the port: the connection's own address.
            refusal = bearer_refusal(
                environ.get("HTTP_AUTHORIZATION"), address=environ.get("REMOTE_ADDR")
            )
            if refusal is not None and refusal.status == 429:
                start_response("429 Too Many Requests", [("Retry-After", str(refusal.retry_after))])
                return [b""]
            if refusal is not None:
                start_response("401 Unauthorized", [("WWW-Authenticate", "Bearer")])
                return [b""]
        body = exposition(database=database)
        start_response("200 OK", [("Content-Type", CONTENT_TYPE)])
        return [body]

    return app


_serving: dict[int, WSGIServer] = {}


def _loopback(addr: str) -> bool:
    if addr == "localhost":
        return True
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:  # "" (every address) or a name
        return False


def serve(*, port: int, addr: str = "", database: bool = False) -> WSGIServer:
    """Serve this host's samples on ``addr:port`` from a daemon thread (once per port).
    Without GARDEN_METRICS_TOKEN only on a loopback address: ImproperlyConfigured otherwise."""
    if port in _serving:
        return _serving[port]
    addr = addr or settings.GARDEN_METRICS_ADDR
    if not settings.GARDEN_METRICS_TOKEN and not _loopback(addr):
        raise ImproperlyConfigured(
            f"metrics: not serving port {port} on {addr or 'every address'}: "
            "GARDEN_METRICS_TOKEN is empty, and without it the metrics port serves only a "
            "loopback GARDEN_METRICS_ADDR (127.0.0.1). Set GARDEN_METRICS_TOKEN, or bind "
            "GARDEN_METRICS_ADDR to 127.0.0.1."
        )
    server = make_server(
        addr,
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
        except ImproperlyConfigured as exc:
            log.error("%s", exc)
        except OSError:
            log.error("metrics: cannot listen on port %s", settings.GARDEN_METRICS_PORT)
