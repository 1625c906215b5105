"""Fixtures for the provider adapter tests: a scripted local HTTP server and a dead port,
allowed as a provider destination the way an operator allows a local model server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.garden.providers.httpserver import ScriptedServer, unused_port

_PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


@pytest.fixture(autouse=True)
def _loopback_allowed(loopback_providers) -> None:
    pass


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx honours proxy variables; a CI proxy would intercept 127.0.0.1 and change the
    # failures under test.
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    try:
        yield scripted
    finally:
        scripted.close()


@pytest.fixture
def refused_url() -> str:
    """A base URL where nothing listens, so connecting is refused."""
    return f"http://127.0.0.1:{unused_port()}"
