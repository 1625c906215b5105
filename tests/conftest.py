"""Suite-wide fixtures: users with built-in agents, API clients, and the service gates.

Tests marked ``postgres`` or ``redis`` need that service. Unreachable, they skip with a reason,
unless GARDEN_REQUIRE_SERVICES=1 (CI), which turns the skip into a failure.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import pytest
from django.conf import settings
from django.db import connection

REQUIRE = os.environ.get("GARDEN_REQUIRE_SERVICES") == "1"


def _redis_ok() -> str | None:
    if not settings.REDIS_URL:
        return "REDIS_URL is not set and no Redis answers on 127.0.0.1:6379"
    import redis

    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1).ping()
    except Exception as exc:  # any failure to reach it is the reason
        return f"Redis at {settings.REDIS_URL} is unreachable: {exc}"
    return None


def _postgres_ok() -> str | None:
    if connection.vendor != "postgresql":
        return "DATABASE_URL does not point at PostgreSQL (running on SQLite)"
    return None


def pytest_configure(config) -> None:
    # Django's default PBKDF2 takes ~1.7 s per password on a 2-core machine, and most tests
    # make two users: the suite hashes with a fast hasher (Django's own advice for tests).
    # Nothing under test depends on the hasher.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    _loopback_only()


def _loopback_only() -> None:
    """The suite's traffic stays on this machine: a connection from this process to any
    address but loopback, or a name lookup of anything but localhost, fails at once (a fuzzer
    that gives a server URL of a public host, say, never reaches it)."""
    import ipaddress
    import socket

    def local(host) -> bool:
        if host is None:
            return True
        name = host.decode() if isinstance(host, bytes) else str(host)
        name = name.split("%", 1)[0].lower().rstrip(".")
        if name in ("localhost", "") or name.endswith(".localhost"):
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def getaddrinfo(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        try:
            literal = name is not None and ipaddress.ip_address(str(name).split("%", 1)[0])
        except ValueError:
            literal = None
        if not literal and name is not None:
            try:  # a number the C library reads as an address (2130706433, 0x7f.1): no lookup
                literal = bool(socket.inet_aton(str(name)))
            except OSError:
                literal = False
        if not literal and not local(host):
            raise socket.gaierror(socket.EAI_NONAME, f"the test suite resolves no names ({host})")
        return real_getaddrinfo(host, *args, **kwargs)

    def refused(sock, address) -> bool:
        return sock.family in (socket.AF_INET, socket.AF_INET6) and not local(address[0])

    def connect(sock, address):
        if refused(sock, address):
            raise ConnectionRefusedError(f"the test suite connects to loopback only ({address})")
        return real_connect(sock, address)

    def connect_ex(sock, address):
        if refused(sock, address):
            raise ConnectionRefusedError(f"the test suite connects to loopback only ({address})")
        return real_connect_ex(sock, address)

    socket.getaddrinfo = getaddrinfo
    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker, check in (("postgres", _postgres_ok), ("redis", _redis_ok)):
        if item.get_closest_marker(marker):
            reason = check()
            if reason:
                if REQUIRE:
                    pytest.fail(f"GARDEN_REQUIRE_SERVICES=1 but {reason}", pytrace=False)
                pytest.skip(reason)


def pytest_report_header(config) -> list[str]:
    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    return [
        f"garden: database={db} redis={'yes' if settings.REDIS_URL else 'no'} "
        f"require_services={REQUIRE}"
    ]


@pytest.fixture(autouse=True)
def _fresh_transcripts():
    """Each test's database starts afresh (and may hand out the same ids again): so do the
    per-process transcripts and rosters the step reads from."""
    from groups import room, step, transcripts

    transcripts.forget()
    room.forget_rosters()
    step.forget_owners()
    yield
    transcripts.forget()
    room.forget_rosters()
    step.forget_owners()


@pytest.fixture
def loopback_providers(settings):
    """Let model accounts reach this test's local HTTP servers on 127.0.0.1, the way an
    operator allows a local Ollama (GARDEN_EGRESS_ALLOW_PROVIDERS); tools stay refused."""
    settings.GARDEN_EGRESS_ALLOW_PROVIDERS = ["127.0.0.1"]


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user(username="owner", password="pw-owner-123")


@pytest.fixture
def stranger(django_user_model):
    return django_user_model.objects.create_user(username="stranger", password="pw-stranger-123")


@pytest.fixture
def api(owner):
    """An API client signed in as ``owner`` that enforces CSRF like a browser session."""
    from rest_framework.test import APIClient

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(owner)
    return CsrfClient(client)


class CsrfClient:
    """Wraps APIClient: fetches a CSRF token once and sends it on every write."""

    def __init__(self, client) -> None:
        from django.middleware.csrf import _get_new_csrf_string

        self.client = client
        self.token = _get_new_csrf_string()
        client.cookies[settings.CSRF_COOKIE_NAME] = self.token

    def get(self, path, data=None, **kw):
        return self.client.get(path, data, **kw)

    def _write(self, method, path, data=None, csrf=True, **kw):
        headers = {"HTTP_X_CSRFTOKEN": self.token} if csrf else {}
        return getattr(self.client, method)(path, data, format="json", **headers, **kw)

    def post(self, path, data=None, **kw):
        return self._write("post", path, data, **kw)

    def patch(self, path, data=None, **kw):
        return self._write("patch", path, data, **kw)

    def delete(self, path, data=None, **kw):
        return self._write("delete", path, data, **kw)


@pytest.fixture
def celery_worker_thread(transactional_db):
    """A real Celery worker (consumer, pool, acks) running in this process on the configured
    broker: Redis when REDIS_URL is set, else the filesystem transport."""
    from celery.contrib.testing.worker import start_worker

    from config.celery import app
    from garden import heartbeat

    app.control.purge()
    with start_worker(
        app,
        pool="threads",
        concurrency=2,
        perform_ping_check=False,
        loglevel=os.environ.get("GARDEN_TEST_WORKER_LOGLEVEL", "WARNING"),
        shutdown_timeout=15,
    ) as worker:
        # celery's test worker sends no worker_ready: it beats as every other worker does.
        heartbeat.start(hostname=worker.hostname, concurrency=2)
        try:
            yield app
            _wait_until_worker_idle()
        finally:
            heartbeat.stop(hostname=worker.hostname)


@contextmanager
def threads_worker(concurrency: int):
    """A real Celery worker in this process with ``concurrency`` threads (a test's tool or
    counter living in this process is the one the worker runs). Needs ``transactional_db``."""
    from celery.contrib.testing.worker import start_worker

    from config.celery import app
    from garden import heartbeat

    app.control.purge()
    with start_worker(
        app,
        pool="threads",
        concurrency=concurrency,
        perform_ping_check=False,
        loglevel=os.environ.get("GARDEN_TEST_WORKER_LOGLEVEL", "WARNING"),
        shutdown_timeout=15,
    ) as worker:
        heartbeat.start(hostname=worker.hostname, concurrency=concurrency)
        try:
            yield app
            _wait_until_worker_idle()
        finally:
            heartbeat.stop(hostname=worker.hostname)


def _wait_until_worker_idle(timeout: float = 30.0, settle: float = 0.5) -> None:
    """Let the work a test set going finish before the worker stops and the test database is
    flushed under it: no task running, reserved or scheduled (a retry's countdown) for
    ``settle`` seconds in a row, so a task that the last one enqueued (a request's
    after_request, the next step) is fetched and run too."""
    import time

    from celery.worker import state

    deadline = time.monotonic() + timeout
    quiet_since = None
    while time.monotonic() < deadline:
        busy = state.active_requests or state.reserved_requests or state.scheduled_requests
        now = time.monotonic()
        if busy:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= settle:
            return
        time.sleep(0.05)


def wait_for(predicate, *, timeout: float = 20.0, interval: float = 0.05):
    """Poll ``predicate`` until it returns a truthy value; fail the test with a clear message."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"condition not met within {timeout}s: {getattr(predicate, '__name__', predicate)}")
