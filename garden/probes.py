"""GET /healthz (the process answers) and GET /readyz (database, Redis, broker, migrations),
answered by ``ProbeMiddleware`` before Django validates the Host or redirects to HTTPS, so an
orchestrator or Prometheus reaches them by pod IP over plain HTTP. No other path is exempt.

Each readiness check runs on a thread of its own, bounded by GARDEN_PROBE_TIMEOUT_SECONDS, and
closes that thread's database connections when it ends, so the probe never hangs and never
holds a connection after answering. A failing check is named by a short code, never a message.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import redis
from django.conf import settings
from django.db import connections, transaction
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.utils.cache import add_never_cache_headers
from kombu import Connection

from garden.redis_conn import build_pool

log = logging.getLogger(__name__)

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
EMBEDDED_BROKER = "garden.broker:Transport"

# Once every migration is applied it stays so for this process's code: checked once.
_migrations_applied = False
# The last checks' codes and when they ended; one probe at a time runs them.
_last: tuple[float, dict[str, str]] | None = None
_checking = threading.Lock()


def _check_database() -> str:
    conn = connections["default"]
    if conn.vendor != "postgresql":
        # No transaction: on SQLite, BEGIN IMMEDIATE would wait on any writer's lock.
        with conn.cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok"
    with transaction.atomic(using=conn.alias), conn.cursor() as cursor:
        # Bounded on the server too, for this transaction only.
        timeout_ms = int(settings.GARDEN_PROBE_TIMEOUT_SECONDS * 1000)
        cursor.execute(f"SET LOCAL statement_timeout = {timeout_ms}")
        cursor.execute("SELECT 1")
    return "ok"


def _check_migrations() -> str:
    global _migrations_applied
    if _migrations_applied:
        return "ok"
    executor = MigrationExecutor(connections["default"])
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        return "pending"
    _migrations_applied = True
    return "ok"


def _check_redis() -> str:
    timeout = settings.GARDEN_PROBE_TIMEOUT_SECONDS
    pool = build_pool(
        settings.REDIS_URL,
        max_connections=1,
        timeout=timeout,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
    )
    try:
        redis.Redis(connection_pool=pool, retry=None).ping()
    finally:
        pool.disconnect()
    return "ok"


def _check_broker() -> str:
    timeout = settings.GARDEN_PROBE_TIMEOUT_SECONDS
    with Connection(
        settings.CELERY_BROKER_URL,
        transport=getattr(settings, "CELERY_BROKER_TRANSPORT", None),
        transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS,
        ssl=getattr(settings, "CELERY_BROKER_USE_SSL", None) or False,
        connect_timeout=timeout,
    ) as conn:
        conn.ensure_connection(max_retries=1, timeout=timeout)
    return "ok"


def _checks() -> dict[str, Callable[[], str]]:
    checks = {"database": _check_database, "migrations": _check_migrations}
    if settings.REDIS_URL:
        checks["redis"] = _check_redis
    if getattr(settings, "CELERY_BROKER_TRANSPORT", None) != EMBEDDED_BROKER:
        checks["broker"] = _check_broker
    return checks


def _run(name: str, check: Callable[[], str]) -> str:
    try:
        return check()
    except Exception as exc:
        log.warning("readiness check %s failed: %s", name, type(exc).__name__)
        return "error"
    finally:
        # This thread's connections, not the request's: none outlives the check.
        connections.close_all()


def readiness() -> dict[str, str]:
    """Every check's code ("ok", "error", "pending", "timeout"), within one time bound."""
    checks = _checks()
    pool = ThreadPoolExecutor(max_workers=len(checks), thread_name_prefix="readyz")
    try:
        futures = {name: pool.submit(_run, name, check) for name, check in checks.items()}
        deadline = time.monotonic() + settings.GARDEN_PROBE_TIMEOUT_SECONDS + 0.5
        results = {}
        for name, future in futures.items():
            try:
                results[name] = future.result(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeout:
                results[name] = "timeout"
        return results
    finally:
        # A check past its bound finishes (and closes its connection) on its own.
        pool.shutdown(wait=False)


def recent_readiness() -> dict[str, str]:
    """``readiness()``, run at most once per GARDEN_PROBE_CACHE_SECONDS in this process. A probe
    meanwhile gets the last codes; so does one that comes while another runs the checks (it
    does not wait, holding a web thread, behind a slow database), unless there are none yet."""
    global _last
    last = _last
    if last is not None and time.monotonic() - last[0] < settings.GARDEN_PROBE_CACHE_SECONDS:
        return last[1]
    if not _checking.acquire(blocking=last is None):
        return last[1]
    try:
        last = _last
        if last is not None and time.monotonic() - last[0] < settings.GARDEN_PROBE_CACHE_SECONDS:
            return last[1]  # another probe ran them while this one waited
        results = readiness()
        _last = (time.monotonic(), results)
        return results
    finally:
        _checking.release()


def _answer(request: HttpRequest) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        response = HttpResponseNotAllowed(["GET", "HEAD"])
    elif request.path_info == HEALTH_PATH:
        response = JsonResponse({"status": "ok"})
    else:
        checks = recent_readiness()
        ready = all(code == "ok" for code in checks.values())
        response = JsonResponse(
            {"status": "ready" if ready else "unready", "checks": checks},
            status=200 if ready else 503,
        )
    add_never_cache_headers(response)
    return response


class ProbeMiddleware:
    """Right after DbReleaseMiddleware, before SecurityMiddleware and CommonMiddleware: answers
    the two probe paths itself (no Host check, no HTTPS redirect, no session, CSRF or auth)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info in (HEALTH_PATH, READY_PATH):
            return _answer(request)
        return self.get_response(request)
