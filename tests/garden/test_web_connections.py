"""A web request never strands a pooled database connection: real daphne on PostgreSQL with a
pool of two, a loopback server that answers one byte a second, and clients that go away while
the views wait on it (MCP server add, patch and refresh, a model account's Test). Afterwards
the pool is as it was and another owner is served at once. In process, the strict guard names
a view that would do network I/O holding a connection or inside its own atomic block."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from cryptography.fernet import Fernet
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import RequestFactory

from garden import egress
from garden.db_release import (
    ConnectionHeldAcrossNetwork,
    DbReleaseMiddleware,
    NetworkInTransaction,
)
from garden.models import McpServer
from garden.services.accounts import model_account_create
from garden.services.tokens import token_create
from tests.mcp_server import free_port
from tests.support.processes import spawn

POOL = 2
# Each kind of slow request, more of them than the pool holds.
EACH = POOL + 1


class DrippingServer:
    """Answers every connection with one byte a second until the client hangs up: a server
    that never finishes its answer. Counts the connections it took and those still open."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.arrived = 0
        self.open = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self.arrived += 1
                self.open += 1
            threading.Thread(target=self._drip, args=(sock,), daemon=True).start()

    def _drip(self, sock: socket.socket) -> None:
        answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + b" " * 600
        try:
            sock.settimeout(0.2)
            for byte in answer:
                if self._stop.is_set():
                    break
                try:
                    if sock.recv(65536) == b"":
                        break  # the client hung up
                except TimeoutError:
                    pass
                sock.sendall(bytes([byte]))
                self._stop.wait(1.0)
        except OSError:
            pass
        finally:
            sock.close()
            with self._lock:
                self.open -= 1

    def close(self) -> None:
        self._stop.set()
        self.listener.close()


def wait_for(check, *, within: float, what) -> None:
    end = time.monotonic() + within
    while not check():
        if time.monotonic() > end:
            pytest.fail(f"not within {within} s: {what()}")
        time.sleep(0.05)  # waits FOR the condition, with a deadline


def pool_in_use(base: str, token: str) -> int:
    text = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {token}"}).text
    found = re.search(r'^garden_db_pool_connections\{state="in_use"\} (\S+)$', text, re.M)
    assert found, text[:2000]
    return int(float(found[1]))


@pytest.fixture
def web_env(transactional_db, settings) -> dict[str, str]:
    """This test database behind a pool of two, as in production (GARDEN_ENV=production),
    with the pasted keys' encryption key this test process uses too."""
    key = Fernet.generate_key().decode()
    settings.GARDEN_FERNET_KEYS = [key]
    db = settings.DATABASES["default"]
    url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    # This process's own samples: a multiprocess directory (even an empty name) is not wanted.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GARDEN_METRICS_DIR", "PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir")
    }
    env.update(
        DATABASE_URL=url,
        GARDEN_ENV="production",
        DJANGO_SECRET_KEY=settings.SECRET_KEY,
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
        GARDEN_HTTPS="0",
        GARDEN_DB_POOL_MAX=str(POOL),
        GARDEN_DB_POOL_TIMEOUT="2",
        GARDEN_EGRESS_ALLOW="127.0.0.1",
        GARDEN_MCP_TIMEOUT="4",
        GARDEN_ACCOUNT_TEST_TIMEOUT="4",
        GARDEN_METRICS_TOKEN="metrics-secret-for-this-test",
        GARDEN_STRICT_DB_RELEASE="1",
        GARDEN_FERNET_KEYS=key,
    )
    if db.get("PASSWORD"):
        env["DATABASE_URL"] = url.replace(f"{db['USER']}@", f"{db['USER']}:{db['PASSWORD']}@")
    return env


def start(command: list[str], env: dict[str, str], port: int) -> subprocess.Popen:
    proc = spawn(command, env)
    end = time.monotonic() + 30
    while time.monotonic() < end and proc.poll() is None:
        try:
            httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=1)
            return proc
        except httpx.TransportError:
            time.sleep(0.1)  # waits FOR the server to answer, with a deadline
    proc.kill()
    pytest.fail(f"{command[2]} did not answer: {proc.communicate()[0]}")


def stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=20)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[0]


@pytest.fixture
def daphne(web_env) -> Iterator[str]:
    """daphne serving config.asgi, cancelling an application 1 s after its client left."""
    port = free_port()
    proc = start(
        [
            sys.executable,
            "-m",
            "daphne",
            "--application-close-timeout",
            "1",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "config.asgi:application",
        ],
        web_env,
        port,
    )
    yield f"http://127.0.0.1:{port}"
    output = stop(proc)
    print(output)  # shown when the test fails
    assert "DB_CONNECTION_HELD" not in output and "NETWORK_IN_TRANSACTION" not in output, output


def bearer(username: str) -> tuple[object, str]:
    user = get_user_model().objects.create_user(username=username, password="pw-123-pw")
    made = token_create(owner=user, name="t", scopes=["read", "write", "manage"])
    return user, made.secret


def send_and_leave_open(base: str, token: str, method: str, path: str, body: str) -> socket.socket:
    """A request whose client will go away before the answer (the caller closes it)."""
    port = int(base.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port))
    data = body.encode()
    sock.sendall(
        (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        ).encode()
        + data
    )
    return sock


@pytest.mark.postgres
@pytest.mark.timeout(90)
def test_clients_that_leave_slow_requests_strand_no_pooled_connection(
    daphne, web_env, loopback_providers
):
    metrics = web_env["GARDEN_METRICS_TOKEN"]
    slow = DrippingServer()
    try:
        prober, token = bearer("prober")
        _, other = bearer("other")
        servers = [
            McpServer.objects.create(owner=prober, name=f"s{i}", url=f"{slow.url}/mcp", tools=[])
            for i in range(2 * EACH)
        ]
        accounts = [
            model_account_create(
                owner=prober,
                name=f"a{i}",
                provider="openai",
                model="m",
                api_key="sk-test-0123456789",
                base_url=f"{slow.url}/v1",
            )
            for i in range(EACH)
        ]
        assert httpx.get(
            f"{daphne}/api/groups", headers={"Authorization": f"Bearer {other}"}
        ).is_success
        before = pool_in_use(daphne, metrics)

        mcp_url = f'{{"url": "{slow.url}/mcp"}}'
        requests = (
            [
                ("POST", "/api/mcp-servers", f'{{"name": "n{i}", "url": "{slow.url}/mcp"}}')
                for i in range(EACH)
            ]
            + [("POST", f"/api/mcp-servers/{s.pk}/refresh", "") for s in servers[:EACH]]
            + [("PATCH", f"/api/mcp-servers/{s.pk}", mcp_url) for s in servers[EACH:]]
            + [("POST", f"/api/model-accounts/{a.pk}/test", "") for a in accounts]
        )
        clients = [send_and_leave_open(daphne, token, *request) for request in requests]
        # Every one of them is waiting on the slow server at once: none waits for the pool.
        wait_for(
            lambda: slow.arrived >= len(requests),
            within=10,
            what=lambda: f"{len(requests)} requests at the slow server (came: {slow.arrived})",
        )
        for client in clients:
            client.close()
        # The views give up at their deadline (4 s), long after daphne cancelled them (1 s).
        wait_for(
            lambda: slow.open == 0,
            within=20,
            what=lambda: f"the views' exchanges ended ({slow.open} open)",
        )
        wait_for(
            lambda: pool_in_use(daphne, metrics) == before,
            within=5,
            what=lambda: f"the pool back to {before} in use (now {pool_in_use(daphne, metrics)})",
        )
        started = time.monotonic()
        answer = httpx.get(
            f"{daphne}/api/groups", headers={"Authorization": f"Bearer {other}"}, timeout=10
        )
        took = time.monotonic() - started
        assert answer.status_code == 200, answer.text
        assert took < 1.0, took
        assert not McpServer.objects.filter(name__startswith="n").exists()
    finally:
        slow.close()


@pytest.mark.postgres
@pytest.mark.timeout(90)
def test_rundashboard_holds_no_connection_after_its_first_user_check(web_env):
    get_user_model().objects.create_user(username="someone", password="pw-123-pw")
    port = free_port()
    proc = start([sys.executable, "manage.py", "rundashboard", f"127.0.0.1:{port}"], web_env, port)
    try:
        in_use = pool_in_use(f"http://127.0.0.1:{port}", web_env["GARDEN_METRICS_TOKEN"])
    finally:
        stop(proc)
    assert in_use == 0


# --- in process: the guard names the view that would hold a connection ----------------------


@pytest.fixture
def listener() -> Iterator[str]:
    """A loopback port that takes connections and never answers."""
    sock = socket.create_server(("127.0.0.1", 0))
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
    sock.close()


def serve_view(view) -> None:
    DbReleaseMiddleware(view)(RequestFactory().get("/"))


def fetch(url: str) -> None:
    with egress.build_client("provider") as client:
        try:
            client.get(url, timeout=0.2)
        except httpx.TimeoutException:
            pass


@pytest.mark.django_db(transaction=True)
def test_a_view_that_connects_holding_a_connection_is_named(loopback_providers, listener):
    def holds(request):
        get_user_model().objects.count()
        fetch(listener)

    with pytest.raises(ConnectionHeldAcrossNetwork) as held:
        serve_view(holds)
    assert held.value.code == "DB_CONNECTION_HELD"
    assert connection.connection is None  # handed back as the view ended


@pytest.mark.django_db(transaction=True)
def test_network_inside_the_views_own_atomic_block_is_named(loopback_providers, listener):
    def in_transaction(request):
        with transaction.atomic():
            get_user_model().objects.count()
            with egress.deadline(1):
                fetch(listener)

    with pytest.raises(NetworkInTransaction) as inside:
        serve_view(in_transaction)
    assert inside.value.code == "NETWORK_IN_TRANSACTION"


@pytest.mark.django_db(transaction=True)
def test_a_view_that_reads_then_waits_on_the_network_holds_nothing_meanwhile(
    loopback_providers, listener
):
    seen = []

    def reads_then_fetches(request):
        seen.append(get_user_model().objects.count())
        with egress.deadline(1):
            seen.append(connection.connection)
            fetch(listener)
        seen.append(get_user_model().objects.count())

    serve_view(reads_then_fetches)
    assert seen == [0, None, 0]
    assert connection.connection is None
