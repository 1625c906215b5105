"""A reply is bounded by what its call asked for, against a real local HTTP server as the
owner's model server: a stream past the call's limit is cut there (REPLY_TOO_LARGE, ambiguous:
the model ran) and its connection closed, a whole reply past it is refused the same way, and
JSON nested past the parser's depth is a MalformedReply, never a RecursionError."""

from __future__ import annotations

import json
from typing import Any

import pytest

from garden.providers._http import reply_limit, wire_cap
from garden.providers.types import (
    AmbiguousFailure,
    ChatMessage,
    ChatRequest,
    MalformedReply,
    ReplyTooLarge,
    TextBlock,
)
from tests.conftest import wait_for
from tests.garden.providers.conftest import http_adapter
from tests.garden.providers.test_streaming import openai_whole, sse

SMALL = ChatRequest(
    system="You are terse.",
    messages=(ChatMessage("user", (TextBlock("hi"),)),),
    max_tokens=64,
)
PIECE = "x" * 1_000
# Pieces of PIECE: twenty megabytes. A reader that stops reading keeps its receive window
# small, so what reaches the socket buffers before the close is a few megabytes at most (3.5
# once, on a loaded machine, of a six-megabyte flood): the writes fail long before the end.
FLOOD = 20_000


def openai_flood(pieces: int) -> list[Any]:
    chunk = {"choices": [{"index": 0, "delta": {"content": PIECE}, "finish_reason": None}]}
    return [chunk] * pieces + ["data: [DONE]\n\n"]


def anthropic_flood(pieces: int) -> list[Any]:
    start = sse("message_start", {"message": {"usage": {"input_tokens": 3}}})
    opened = sse("content_block_start", {"index": 0, "content_block": {"type": "text"}})
    delta = sse("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": PIECE}})
    return [start, opened] + [delta] * pieces + [sse("message_stop", {})]


FLOODS = {"openai": openai_flood, "anthropic": anthropic_flood}


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_the_limit_follows_max_tokens_under_the_absolute_cap(settings):
    settings.GARDEN_REPLY_CHARS_PER_TOKEN = 8
    settings.GARDEN_REPLY_SLACK_CHARS = 16_000
    settings.GARDEN_PROVIDER_MAX_REPLY_BYTES = 8_000_000
    assert reply_limit(64) == 64 * 8 + 16_000
    assert reply_limit(1024) == 24_192
    assert reply_limit(10_000_000) == 8_000_000


def test_a_twenty_megabyte_stream_is_cut_at_the_calls_limit(server, adapter):
    limit = reply_limit(SMALL.max_tokens)
    server.stream(*FLOODS[adapter](FLOOD))
    shown: list[str] = []

    with pytest.raises(ReplyTooLarge) as caught:
        http_adapter(adapter, server.url, api_key="k").complete(SMALL, on_text=shown.append)

    assert caught.value.code == "REPLY_TOO_LARGE"
    assert isinstance(caught.value, AmbiguousFailure), "the model ran: the call is kept"
    # Nothing past the limit was handed on, and the connection was closed unread: the server's
    # writes failed long before its twenty megabytes were out.
    assert sum(map(len, shown)) <= limit
    wait_for(lambda: server.streams_ended == 1)
    assert server.sent < FLOOD // 2


def test_a_whole_reply_past_the_limit_is_too_large(server):
    limit = reply_limit(SMALL.max_tokens)
    server.reply(200, openai_whole("y" * (limit + 1)))

    with pytest.raises(ReplyTooLarge, match="this call allows"):
        http_adapter("openai", server.url, api_key="k").complete(SMALL)


def test_a_reply_at_the_limit_is_read(server):
    limit = reply_limit(SMALL.max_tokens)
    server.reply(200, openai_whole("y" * limit))

    reply = http_adapter("openai", server.url, api_key="k").complete(SMALL)

    assert len(reply.text) == limit


def test_tool_call_arguments_count_against_the_limit(server):
    limit = reply_limit(SMALL.max_tokens)
    arguments = json.dumps({"request": "z" * limit})
    head = {"index": 0, "id": "c1", "type": "function"}
    chunks = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [{**head, "function": {"name": "t"}}]}}]},
        *(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": 0, "function": {"arguments": part}}]},
                    }
                ]
            }
            for part in (arguments[i : i + 500] for i in range(0, len(arguments), 500))
        ),
        "data: [DONE]\n\n",
    ]
    server.stream(*chunks)

    with pytest.raises(ReplyTooLarge):
        http_adapter("openai", server.url, api_key="k").complete(SMALL, on_text=lambda _: None)


def test_a_body_past_the_wire_cap_is_too_large(server, settings):
    settings.GARDEN_PROVIDER_MAX_REPLY_BYTES = 2_000
    server.reply(200, openai_whole("w" * 5_000))

    with pytest.raises(ReplyTooLarge) as caught:
        http_adapter("openai", server.url, api_key="k").complete(SMALL)

    assert caught.value.status == 200


def test_a_stream_of_events_with_no_text_is_cut_at_the_wire_bound(server):
    """Events that carry nothing count against the bytes the call may read."""
    limit = wire_cap(reply_limit(SMALL.max_tokens))
    empty = {"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": None}]}
    events = [empty] * (4 * limit // len(json.dumps(empty)))
    server.stream(*events, "data: [DONE]\n\n")

    with pytest.raises(ReplyTooLarge, match=f"larger than {limit} bytes"):
        http_adapter("openai", server.url, api_key="k").complete(SMALL, on_text=lambda _: None)

    wait_for(lambda: server.streams_ended == 1)
    assert server.sent < len(events)


def test_json_nested_past_the_parsers_depth_is_malformed(server, adapter):
    body = ('{"choices": ' if adapter == "openai" else '{"content": ') + nested(200_000) + "}"
    server.reply(200, body.encode())

    with pytest.raises(MalformedReply) as caught:
        http_adapter(adapter, server.url, api_key="k").complete(SMALL)

    assert caught.value.code == "PROVIDER_MALFORMED_REPLY"
    assert isinstance(caught.value.__cause__, RecursionError)


def test_a_streamed_event_nested_past_the_parsers_depth_is_malformed(server):
    server.stream(f"data: {nested(200_000)}\n\n")

    with pytest.raises(MalformedReply, match="not JSON"):
        http_adapter("openai", server.url, api_key="k").complete(SMALL, on_text=lambda _: None)


def test_a_reply_of_an_unexpected_shape_is_malformed(server):
    # ``function`` a list: the mapping reads it as an object.
    server.reply(
        200,
        {"choices": [{"message": {"content": None, "tool_calls": [{"function": []}]}}]},
    )

    with pytest.raises(MalformedReply):
        http_adapter("openai", server.url, api_key="k").complete(SMALL)
