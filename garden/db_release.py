"""A web request hands its database connections back before any network I/O and when its
view returns.

Why: under ASGI (daphne), Django runs the sync middleware chain and the view on a thread of
its own per request (``django/core/handlers/asgi.py``: ``ASGIHandler.handle`` runs
``get_response_async``, which wraps the sync chain in ``sync_to_async(thread_sensitive=True)``
inside a fresh ``ThreadSensitiveContext``, so every request gets its own executor thread).
``request_finished`` — whose ``close_old_connections`` returns a pooled connection — is sent
only after the response is sent, from ``sync_to_async(response.close)``. When the client goes
away, daphne cancels the application after ``--application-close-timeout`` (10 s); the task
is cancelled while the view's thread is still in its network wait, ``request_finished`` never
runs on that thread, and its pooled connection (``GARDEN_DB_POOL_MAX``) is never given back.
Seven aborted requests emptied a pool of eight. A persistent connection is never reused under
ASGI anyway (the next request has another thread), so giving it back early costs nothing.

- ``DbReleaseMiddleware`` (first in ``MIDDLEWARE``) marks the thread as serving a web request
  and, in a ``finally`` on the view's own thread, closes (returns to the pool) this thread's
  connections unless an atomic block is open. A streaming response that reads the database
  later simply takes a connection again, lazily.
- ``release_before_network()`` is called on entry to ``garden.egress.deadline()``: in a web
  request it hands the connection back, and raises ``NETWORK_IN_TRANSACTION`` (a programming
  error) inside an atomic block, since network I/O inside a transaction is a bug.
- ``check_no_connection_held()`` is called when an egress client connects: a web request that
  still holds a connection raises in strict mode (``GARDEN_STRICT_DB_RELEASE``) and logs an
  error otherwise.

A test's own atomic block (Django's ``TestCase``) is not the code's: it is ignored.
``pool_gauges()`` says, at a scrape of /metrics, how many of this process's pooled
connections are lent out and how many are free.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponse
from prometheus_client.core import GaugeMetricFamily, Metric

log = logging.getLogger(__name__)

_state = threading.local()


class NetworkInTransaction(RuntimeError):
    """Network I/O started inside an atomic block of a web request (code NETWORK_IN_TRANSACTION):
    the transaction, its row locks and its pooled connection would wait on a remote server."""

    code = "NETWORK_IN_TRANSACTION"


class ConnectionHeldAcrossNetwork(RuntimeError):
    """A web request opened a network connection while holding a database connection (code
    DB_CONNECTION_HELD): a client that goes away would strand it outside the pool."""

    code = "DB_CONNECTION_HELD"


def serving_web_request() -> bool:
    return getattr(_state, "depth", 0) > 0


def _own_atomic(conn) -> bool:
    """Whether ``conn`` is inside an atomic block of the code's (not only a test case's)."""
    return any(not getattr(block, "_from_testcase", False) for block in conn.atomic_blocks)


def release_connections() -> None:
    """Close (hand back to the pool) this thread's connections outside atomic blocks."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and not conn.in_atomic_block:
            conn.close()


def release_before_network() -> None:
    """In a web request, hand this thread's connections back before network I/O."""
    if not serving_web_request():
        return
    for conn in connections.all(initialized_only=True):
        if conn.in_atomic_block:
            if _own_atomic(conn):
                raise NetworkInTransaction(
                    f"network I/O inside an atomic block on database {conn.alias!r}"
                )
            continue
        if conn.connection is not None:
            conn.close()


def check_no_connection_held() -> None:
    """At connect time: a web request must hold no database connection."""
    if not serving_web_request():
        return
    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        if conn.in_atomic_block and not _own_atomic(conn):
            continue
        message = f"a web request opens a network connection holding database {conn.alias!r}"
        if settings.GARDEN_STRICT_DB_RELEASE:
            raise ConnectionHeldAcrossNetwork(message)
        log.error(message)
        return


def pool_gauges() -> Iterator[Metric]:
    """This process's pool of database connections (GARDEN_DB_POOL_MAX): lent out and free.
    Read before any other scrape gauge, while the scrape itself holds none."""
    pool = getattr(connections["default"], "pool", None)
    if pool is None:
        return
    stats = pool.get_stats()
    family = GaugeMetricFamily(
        "garden_db_pool_connections",
        "This process's pooled database connections: in_use (lent out) and idle.",
        labels=["state"],
    )
    size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
    family.add_metric(["in_use"], size - idle)
    family.add_metric(["idle"], idle)
    yield family


class DbReleaseMiddleware:
    """Outermost, sync: see the module docstring."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        _state.depth = getattr(_state, "depth", 0) + 1
        try:
            return self.get_response(request)
        finally:
            _state.depth -= 1
            release_connections()
