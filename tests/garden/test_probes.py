"""/healthz and /readyz answer by pod IP over plain HTTP under production settings, while every
other path still refuses that Host; /readyz names the check that fails (an unreachable
database or Redis, each a closed loopback port) and holds no database connection after."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connections
from django.db.backends.signals import connection_created
from django.test import override_settings

from garden import probes
from tests.garden import test_web_connections as served
from tests.mcp_server import free_port

POD = "10.1.2.3:8000"
# The served web's environment: this test database, production mode (see that module).
web_env = served.web_env
PRODUCTION_LIKE = override_settings(
    DEBUG=False, ALLOWED_HOSTS=["garden.example"], SECURE_SSL_REDIRECT=True
)


@pytest.fixture
def production(settings):
    with PRODUCTION_LIKE:
        yield


@pytest.fixture(autouse=True)
def fresh_checks(settings):
    """Each probe of these tests runs its checks (the flood test sets its own window), with
    time for a loaded machine's (a closed port fails at once all the same)."""
    settings.GARDEN_PROBE_CACHE_SECONDS = 0
    settings.GARDEN_PROBE_TIMEOUT_SECONDS = 10
    probes._last = None  # the answers another test's settings gave
    yield
    probes._last = None


@pytest.mark.django_db(transaction=True)
def test_a_flood_of_readiness_probes_runs_the_checks_once_a_window(client, settings):
    """/readyz asks nothing of its caller: 30 probes, 10 at a time, run the checks once (two
    database connections, the database's and the migrations' checks), not 30 times."""
    settings.GARDEN_PROBE_CACHE_SECONDS = 60
    opened = []

    def count(sender, connection, **kwargs):
        opened.append(connection.alias)

    connection_created.connect(count)
    try:
        with ThreadPoolExecutor(10) as pool:
            codes = list(pool.map(lambda _: client.get("/readyz"), range(30)))
        said = codes[0].json()
        codes = [c.status_code for c in codes]
    finally:
        connection_created.disconnect(count)
    assert codes == [200] * 30, said
    assert opened.count("default") <= 2


def test_healthz_answers_by_pod_ip(client, production):
    response = client.get("/healthz", HTTP_HOST=POD)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]
    assert client.head("/healthz", HTTP_HOST=POD).status_code == 200
    assert client.post("/healthz", HTTP_HOST=POD).status_code == 405


@pytest.mark.django_db
def test_readyz_answers_by_pod_ip(client, production):
    response = client.get("/readyz", HTTP_HOST=POD)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ready"
    assert set(body["checks"].values()) == {"ok"}
    assert {"database", "migrations"} <= set(body["checks"])
    assert "set-cookie" not in {key.lower() for key in response.headers}


@pytest.mark.django_db
def test_other_paths_still_refuse_the_pod_ip(client, production):
    assert client.get("/api/groups", HTTP_HOST=POD).status_code == 400
    assert client.get("/healthz/", HTTP_HOST=POD).status_code == 400


@pytest.mark.django_db(transaction=True)
def test_readyz_holds_no_database_connection(client):
    assert client.get("/readyz").status_code == 200
    assert connections["default"].connection is None


@pytest.fixture
def unreachable_database():
    """New connections to "default" go to a closed loopback port (or an unopenable file)."""
    original = connections.settings["default"]
    if original["ENGINE"] == "django.db.backends.postgresql":
        broken = {**original, "HOST": "127.0.0.1", "PORT": str(free_port())}
    else:
        broken = {**original, "NAME": "/nonexistent-dir/garden.sqlite3"}
    connections.settings["default"] = broken
    try:
        yield
    finally:
        connections.settings["default"] = original


@pytest.mark.django_db
def test_readyz_names_an_unreachable_database(client, production, unreachable_database):
    response = client.get("/readyz", HTTP_HOST=POD)
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unready"
    assert body["checks"]["database"] == "error"
    assert "Traceback" not in response.content.decode()


@pytest.mark.django_db
def test_readyz_names_an_unreachable_redis(client, production):
    with override_settings(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0"):
        response = client.get("/readyz", HTTP_HOST=POD)
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["redis"] == "error"
    assert checks["database"] == "ok"


@pytest.fixture
def production_daphne(web_env) -> Iterator[str]:
    """Real daphne serving config.asgi in production mode, HTTPS on, one allowed host."""
    if connections["default"].vendor != "postgresql":
        pytest.skip("the served database is PostgreSQL's test database")
    env = {**web_env, "GARDEN_HTTPS": "1", "DJANGO_ALLOWED_HOSTS": "garden.example"}
    port = free_port()
    command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    proc = served.start([*command, "config.asgi:application"], env, port)
    yield f"http://127.0.0.1:{port}"
    print(served.stop(proc))  # shown when the test fails


def test_daphne_answers_probes_by_pod_ip(production_daphne):
    # Only the Host header names the pod; the connection is to loopback.
    pod = {"Host": POD}
    assert httpx.get(f"{production_daphne}/healthz", headers=pod).json() == {"status": "ok"}
    ready = httpx.get(f"{production_daphne}/readyz", headers=pod, timeout=10)
    assert ready.status_code == 200, ready.text
    assert httpx.get(f"{production_daphne}/api/groups", headers=pod).status_code == 400
    allowed = {"Host": "garden.example"}
    assert httpx.get(f"{production_daphne}/api/groups", headers=allowed).status_code == 301
