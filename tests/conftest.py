"""Suite-wide fixtures: users with built-in agents, API clients, and the service gates.

Tests marked ``postgres`` or ``redis`` need that service. Unreachable, they skip with a reason,
unless GARDEN_REQUIRE_SERVICES=1 (CI), which turns the skip into a failure.
"""

from __future__ import annotations

import os

import pytest
from django.conf import settings
from django.db import connection

# The worker helpers live in the kit; tests import them from here too.
from tests.support.workers import threads_worker, wait_for  # noqa: F401
from tests.support.workers import wait_until_worker_idle as _wait_until_worker_idle  # noqa: F401

# The test kit's fixtures (tests/support/fixtures.py): drive, captured_events, clock, runtime,
# signed_in, and the run context no test inherits.
pytest_plugins = ["tests.support.fixtures", "tests.support.rows"]

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
    # Every event any test makes the code send is checked against its registered serializer
    # (garden/event_schema.py): a payload field added without its serializer fails there.
    settings.GARDEN_CHECK_EVENTS = True
    # A web request that opens an egress connection holding a database connection fails
    # (DB_CONNECTION_HELD) instead of logging (garden/db_release.py).
    settings.GARDEN_STRICT_DB_RELEASE = True
    _flush_by_delete()
    _loopback_only()


def _flush_by_delete() -> None:
    """A transactional test ends by emptying every table. PostgreSQL's TRUNCATE of all ~70 of
    them makes new files for each table and index: ~0.75 s a test, hundreds of times a run.
    The handful of rows a test leaves go as fast with DELETE, in the flush's one transaction
    (Django's foreign keys are deferred to its commit, so the order does not matter). Nothing
    under test flushes; sequences are never reset by the suite."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade:
            return truncate(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        return [f"DELETE FROM {self.quote_name(table)};" for table in tables if table not in KEPT]

    # The content types and permissions that migrate made stay, as every flush would make the
    # same rows again (its post_migrate reads them and finds nothing to add).
    KEPT = {"django_content_type", "auth_permission"}
    truncate = DatabaseOperations.sql_flush
    DatabaseOperations.sql_flush = sql_flush


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
    from groups import thread_cache
    from groups.loop import room, step

    thread_cache.forget()
    room.forget_rosters()
    step.forget_owners()
    yield
    thread_cache.forget()
    room.forget_rosters()
    step.forget_owners()


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Each test starts with an empty cache: rate windows, call slots, listings. On SQLite a
    rolled-back test hands out the same user ids again, so the next test's owner would inherit
    the last one's request rates (429 where 202 was due); on PostgreSQL the ids differ but the
    state is still not the test's own. With Redis, only this site's keys (its prefix) go: the
    broker's queues in the same database are left alone."""
    from tests.support.state import clear_cache

    clear_cache()
    yield
    clear_cache()


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
    from tests.support.api import sign_in

    return sign_in(owner)


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
    with threads_worker(2) as app:
        yield app
