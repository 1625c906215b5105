"""Fixtures for the provider adapter tests: a scripted local HTTP server and a dead port,
allowed as a provider destination the way an operator allows a local model server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from garden.providers import Provider, get_provider
from garden.providers.types import AccountConfig
from tests.garden.providers.httpserver import ScriptedServer, unused_port

# The adapters that speak HTTP, for the tests of what they share.
HTTP_ADAPTERS = ("anthropic", "openai")

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


@pytest.fixture(params=HTTP_ADAPTERS)
def adapter(request) -> str:
    return request.param


def http_adapter(provider: str, base_url: str, *, api_key: str, timeout: float = 5.0) -> Provider:
    """The adapter the registry picks for an account of ``provider`` at ``base_url`` (both
    HTTP adapters take a base URL ending in the API's ``/v1``)."""
    return get_provider(
        AccountConfig(
            provider=provider,
            model="model-test",
            base_url=f"{base_url}/v1",
            api_key=api_key,
            timeout=timeout,
        )
    )
