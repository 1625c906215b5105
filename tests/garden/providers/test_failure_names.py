"""Each way a model call fails is named for what happened — a server that is not running is
not a wrong key — and the words are the same on an account's Test and in the room."""

from __future__ import annotations

import socket

import httpx
import pytest

from garden.providers._failures import classify_exception
from garden.providers.types import ConfirmedRejection
from tests.garden.providers.httpserver import Respond, ScriptedServer, unused_port

pytestmark = pytest.mark.django_db

KINDS = [
    # (what the server does, the code, words the person reads)
    ("refused", "PROVIDER_UNREACHABLE", "Nothing is answering at the base URL"),
    ("tls", "PROVIDER_TLS_FAILED", "The secure connection to the model server failed"),
    (Respond(401, {"error": "bad key"}), "PROVIDER_AUTH_FAILED", "refused the key"),
    (Respond(404, {"error": "no model"}), "PROVIDER_NOT_FOUND", "no such model"),
    (Respond(429, {"error": "slow"}), "PROVIDER_RATE_LIMITED", "limiting calls"),
    (Respond(503, {"error": "down"}), "PROVIDER_SERVER_ERROR", "HTTP 5xx"),
    (Respond(200, {"late": True}, delay=3.0), "PROVIDER_TIMEOUT", "did not answer in time"),
]


@pytest.fixture
def server(loopback_providers):
    server = ScriptedServer()
    yield server
    server.close()


def base_url_for(kind, server: ScriptedServer) -> str:
    if kind == "refused":
        return f"http://127.0.0.1:{unused_port()}/v1"
    if kind == "tls":  # https to a server that speaks plain http
        return f"https://127.0.0.1:{server.port}/v1"
    server.default = kind
    return f"{server.url}/v1"


@pytest.mark.parametrize(("kind", "code", "words"), KINDS, ids=[k[1] for k in KINDS])
def test_the_account_test_names_what_happened(api, server, kind, code, words):
    made = api.post(
        "/api/model-accounts",
        {
            "name": "local",
            "provider": "openai",
            "model": "m",
            "api_key": "sk-test",
            "base_url": base_url_for(kind, server),
            "timeout_seconds": 1,
        },
    )
    assert made.status_code == 201, made.json()
    result = api.post(f"/api/model-accounts/{made.json()['id']}/test").json()
    assert result["ok"] is False
    assert result["code"] == code
    assert words in result["message"]
    assert "wrong key" not in result["message"] or code == "PROVIDER_AUTH_FAILED"


def test_a_name_that_does_not_resolve_is_named_so():
    # The lowest seam: a connection that failed in the lookup (no resolver is asked here).
    failed = httpx.ConnectError("cannot resolve 'ollama.lan': [Errno -2] Name or service not known")
    failed.__cause__ = socket.gaierror(-2, "Name or service not known")
    named = classify_exception(failed, "openai")
    assert isinstance(named, ConfirmedRejection)
    assert named.code == "PROVIDER_DNS_FAILED"
    assert "host name could not be looked up" in named.words
