"""Who a scrape answers (garden/metrics_exposition.py): wrong bearers from one client address,
on the web's /metrics and on a worker's metrics port, are held off (429, Retry-After) before
the token is compared; without a token the port serves a loopback address only."""

from __future__ import annotations

import logging
import random

import httpx
import pytest

from garden import metrics_exposition
from tests.dashboard.test_rundashboard import free_port

SECRET = "metrics-secret-for-tests-only-0123456789"
LIMIT = 3
WINDOW = 60


def _address() -> str:
    """A loopback address of this test's own, so its failures are counted apart from any
    other test's (the count lives in the shared cache)."""
    return f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(2, 254)}"


@pytest.fixture
def throttled(settings):
    settings.GARDEN_METRICS_TOKEN = SECRET
    settings.GARDEN_METRICS_FAILURE_LIMIT = LIMIT
    settings.GARDEN_METRICS_FAILURE_WINDOW_SECONDS = WINDOW
    return settings


def _held(answer) -> bool:
    return (
        answer.status_code == 429
        and 0 < int(answer.headers["Retry-After"]) <= WINDOW
        and b"garden_" not in answer.content
    )


@pytest.mark.django_db
def test_wrong_bearers_from_one_address_are_held_off_on_metrics(client, throttled):
    address, other = _address(), _address()

    def scrape(token: str | None, at: str = address):
        headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token is not None else {}
        return client.get("/metrics", REMOTE_ADDR=at, **headers)

    for attempt in range(LIMIT):
        assert scrape(f"guess-{attempt}").status_code == 403
    # Held: even the right token is not compared, and a bare request is held too.
    assert _held(scrape(SECRET))
    assert _held(scrape(None))
    # Another address is not held.
    assert scrape(SECRET, at=other).status_code == 200
    assert scrape(None, at=other).status_code == 401


@pytest.mark.django_db
def test_behind_the_proxy_the_address_the_proxy_saw_is_held(client, throttled):
    throttled.GARDEN_BEHIND_PROXY = True
    proxy, guesser, scraper = _address(), _address(), _address()

    def scrape(token: str, forwarded_for: str):
        return client.get(
            "/metrics",
            REMOTE_ADDR=proxy,
            HTTP_X_FORWARDED_FOR=f"10.9.9.9, {forwarded_for}",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )

    for attempt in range(LIMIT):
        assert scrape(f"guess-{attempt}", guesser).status_code == 403
    assert _held(scrape(SECRET, guesser))
    assert scrape(SECRET, scraper).status_code == 200


@pytest.fixture
def port_server(settings):
    """A worker's metrics port on 127.0.0.1, served from this process."""
    started = []

    def start(addr: str = "127.0.0.1") -> str:
        port = free_port()
        started.append(metrics_exposition.serve(port=port, addr=addr))
        return f"http://127.0.0.1:{port}/metrics"

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def _from(address: str) -> httpx.Client:
    """A client whose connections come from ``address`` (a loopback address)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=10)


def test_wrong_bearers_from_one_address_are_held_off_on_the_workers_port(throttled, port_server):
    url = port_server()
    with _from(_address()) as guesser, _from(_address()) as scraper:
        for attempt in range(LIMIT):
            wrong = guesser.get(url, headers={"Authorization": f"Bearer guess-{attempt}"})
            assert wrong.status_code == 401
        assert _held(guesser.get(url, headers={"Authorization": f"Bearer {SECRET}"}))
        assert _held(guesser.get(url))
        assert scraper.get(url, headers={"Authorization": f"Bearer {SECRET}"}).status_code == 200


@pytest.mark.parametrize("addr", ["0.0.0.0", "", "::", "192.0.2.1"])
def test_without_a_token_the_port_serves_no_address_but_loopback(settings, caplog, addr):
    settings.GARDEN_METRICS_TOKEN = ""
    settings.GARDEN_METRICS_PORT = free_port()
    settings.GARDEN_METRICS_ADDR = addr
    with caplog.at_level(logging.ERROR, logger="garden.metrics_exposition"):
        metrics_exposition.on_worker_ready()
    [record] = [r for r in caplog.records if r.name == "garden.metrics_exposition"]
    assert record.levelno == logging.ERROR
    assert "GARDEN_METRICS_TOKEN" in record.getMessage()
    assert "GARDEN_METRICS_ADDR" in record.getMessage()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{settings.GARDEN_METRICS_PORT}/metrics", timeout=5)


def test_without_a_token_the_port_serves_anyone_on_loopback(settings, port_server):
    settings.GARDEN_METRICS_TOKEN = ""
    with _from(_address()) as anyone:
        assert anyone.get(port_server("127.0.0.1")).status_code == 200
