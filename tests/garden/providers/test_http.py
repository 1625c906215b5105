"""The failure contract both HTTP adapters share (garden/providers/_http.py), held against a
real local HTTP server: every way a call fails is one ProviderError class, by whether the
model may have run. The adapters' own request and reply shapes are tested in their files."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from garden.providers.types import (
    AmbiguousFailure,
    ChatMessage,
    ChatReply,
    ChatRequest,
    ConfirmedRejection,
    MalformedReply,
    ProviderConnectionLost,
    ProviderRateLimited,
    ProviderServerError,
    ProviderTimeout,
    ProviderUnreachable,
    TextBlock,
)
from tests.garden.providers.conftest import http_adapter
from tests.support.providers import openai_reply

KEY = "sk-contract-secret-0123"

HELLO = ChatRequest(
    system="You are terse.",
    messages=(ChatMessage("user", (TextBlock("hi"),)),),
    max_tokens=64,
)


def openai_error(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message}}


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def openai_text(text: str) -> dict[str, Any]:
    return openai_reply(text, usage=None)


def anthropic_text(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
    }


# Each adapter with its own error body and a valid answer, as its real API would send them.
WIRES = {
    "openai": (openai_error, openai_text),
    "anthropic": (anthropic_error, anthropic_text),
}


@pytest.fixture
def error_body(adapter) -> Callable[[str, str], dict[str, Any]]:
    return WIRES[adapter][0]


@pytest.fixture
def text_body(adapter) -> Callable[[str], dict[str, Any]]:
    return WIRES[adapter][1]


@pytest.fixture
def complete(adapter, server) -> Callable[..., ChatReply]:
    """One call through the adapter the registry picks for the account, at ``server`` unless
    told otherwise."""

    def call(*, base_url: str | None = None, timeout: float = 5.0) -> ChatReply:
        provider = http_adapter(adapter, base_url or server.url, api_key=KEY, timeout=timeout)
        return provider.complete(HELLO)

    return call


def test_a_good_answer_is_read(server, complete, text_body):
    """The baseline the failures below depart from: the same call, answered well."""
    server.reply(200, text_body("fine"))

    assert complete().text == "fine"


@pytest.mark.parametrize(
    ("headers", "retry_after"),
    [({"Retry-After": "7"}, 7.0), ({"retry-after-ms": "1500"}, 1.5), ({}, None)],
    ids=["seconds", "milliseconds", "none"],
)
def test_429_is_a_confirmed_rejection_that_says_when_to_retry(
    server, complete, error_body, headers, retry_after
):
    # The body echoes the key, as some gateways do: the error must not carry it on.
    server.reply(429, error_body("rate_limit_error", f"slow down, {KEY}"), headers=headers)

    with pytest.raises(ConfirmedRejection) as caught:
        complete()

    assert type(caught.value) is ProviderRateLimited
    assert caught.value.code == "PROVIDER_RATE_LIMITED"
    assert caught.value.status == 429
    assert caught.value.retry_after == retry_after
    message = str(caught.value)
    assert "rate_limit_error" in message and "slow down" in message
    assert KEY not in message and "[redacted]" in message


def test_429_retry_after_as_an_http_date(server, complete, error_body):
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    server.reply(429, error_body("rate_limit_error", "busy"), headers={"Retry-After": when})

    with pytest.raises(ConfirmedRejection) as caught:
        complete()

    assert caught.value.retry_after is not None
    assert 25 <= caught.value.retry_after <= 31


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, "PROVIDER_REJECTED"),
        (401, "PROVIDER_AUTH_FAILED"),
        (403, "PROVIDER_AUTH_FAILED"),
        (404, "PROVIDER_NOT_FOUND"),
        (409, "PROVIDER_REJECTED"),
        (413, "PROVIDER_REJECTED"),
        (422, "PROVIDER_REJECTED"),
    ],
)
def test_4xx_answered_at_once_is_a_confirmed_rejection_named_for_what_it_was(
    server, complete, error_body, status, code
):
    server.reply(status, error_body("invalid_request_error", "nope"))

    with pytest.raises(ConfirmedRejection) as caught:
        complete()

    assert caught.value.code == code
    assert caught.value.status == status
    assert caught.value.retry_after is None


@pytest.mark.parametrize("status", [408, 418])
def test_408_and_unknown_4xx_are_ambiguous(server, complete, error_body, status):
    """Not proof that no work was done: the call counts as possibly run."""
    server.reply(status, error_body("timeout", "request timeout"))

    with pytest.raises(AmbiguousFailure) as caught:
        complete()

    assert type(caught.value) is AmbiguousFailure
    assert caught.value.status == status


@pytest.mark.parametrize("status", [500, 502, 503, 529])
def test_5xx_is_a_server_error(server, complete, error_body, status):
    server.reply(status, error_body("overloaded_error", "boom"))

    with pytest.raises(ProviderServerError) as caught:
        complete()

    assert isinstance(caught.value, AmbiguousFailure)
    assert caught.value.status == status


def test_a_slow_answer_is_a_timeout(server, complete, text_body):
    server.reply(200, text_body("too late"), delay=3.0)
    started = time.monotonic()

    with pytest.raises(ProviderTimeout):
        complete(timeout=0.3)

    assert time.monotonic() - started < 2.0
    assert len(server.requests) == 1


def test_a_reset_after_the_request_was_read_is_connection_lost(server, complete):
    server.reset()

    with pytest.raises(ProviderConnectionLost):
        complete()

    # The server read the whole request before resetting: the call may have run.
    assert server.last.body["model"] == "model-test"


def test_nothing_listening_is_a_confirmed_rejection(complete, refused_url):
    with pytest.raises(ConfirmedRejection) as caught:
        complete(base_url=refused_url)

    assert type(caught.value) is ProviderUnreachable
    assert "is the model server running" in caught.value.words
    assert caught.value.status is None


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"",
        b"<html>gateway</html>",
        json.dumps([1, 2]).encode(),
        json.dumps("a string").encode(),
    ],
    ids=["not-json", "empty", "html", "array", "string"],
)
def test_a_2xx_that_is_not_a_json_object_is_malformed(server, complete, body):
    server.reply(200, body)

    with pytest.raises(MalformedReply) as caught:
        complete()

    assert isinstance(caught.value, AmbiguousFailure)
    assert caught.value.status == 200
