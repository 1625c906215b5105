"""Both HTTP adapters streamed (``on_text``) against a real local HTTP server sending
server-sent events: text pieces arrive in order while the server is still sending, the reply
is the one the same call gives unstreamed, and a stream that breaks is classified like any
other failure."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from garden.providers.types import (
    AmbiguousFailure,
    ChatMessage,
    ChatReply,
    ChatRequest,
    ConfirmedRejection,
    EgressRefusedError,
    MalformedReply,
    ProviderConnectionLost,
    ProviderServerError,
    ProviderTimeout,
    TextBlock,
    ToolCall,
    ToolSpec,
    Usage,
)
from tests.garden.providers.conftest import http_adapter
from tests.support.providers import openai_reply

KEY = "sk-stream-secret-0123"

ASK = ToolSpec(
    name="group.ask",
    description="Ask a member.",
    parameters={"type": "object", "properties": {"member": {"type": "string"}}},
)
HELLO = ChatRequest(
    system="You are terse.",
    messages=(ChatMessage("user", (TextBlock("hi"),)),),
    tools=(ASK,),
    max_tokens=64,
)
PIECES = ["The rent ", "is 1,400 ", "a month, ", "paid on ", "the first."]


# --- the wires ------------------------------------------------------------------------------


def openai_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def openai_text_stream(pieces: list[str]) -> list[Any]:
    return [
        openai_chunk({"role": "assistant", "content": ""}),
        *(openai_chunk({"content": piece}) for piece in pieces),
        openai_chunk({}, "stop"),
        {"choices": [], "usage": {"prompt_tokens": 31, "completion_tokens": 9}},
        "data: [DONE]\n\n",
    ]


def openai_whole(text: str) -> dict[str, Any]:
    return openai_reply(text, usage=(31, 9))


def sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps({'type': event, **data})}\n\n"


def block(index: int, content_block: dict[str, Any]) -> str:
    return sse("content_block_start", {"index": index, "content_block": content_block})


def delta(index: int, kind: str, **fields: Any) -> str:
    return sse("content_block_delta", {"index": index, "delta": {"type": kind, **fields}})


def anthropic_text_stream(pieces: list[str]) -> list[Any]:
    return [
        sse(
            "message_start",
            {
                "message": {
                    "id": "msg_1",
                    "role": "assistant",
                    "content": [],
                    "usage": {"input_tokens": 31, "output_tokens": 1},
                }
            },
        ),
        block(0, {"type": "text", "text": ""}),
        'event: ping\ndata: {"type": "ping"}\n\n',
        *(delta(0, "text_delta", text=piece) for piece in pieces),
        sse("content_block_stop", {"index": 0}),
        sse("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}}),
        sse("message_stop", {}),
    ]


def anthropic_whole(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 31, "output_tokens": 9},
    }


WIRES = {
    "openai": (openai_text_stream, openai_whole),
    "anthropic": (anthropic_text_stream, anthropic_whole),
}


@pytest.fixture
def complete(adapter, server) -> Callable[..., ChatReply]:
    """One call through the adapter the registry picks, at ``server``; ``pieces`` collects
    what ``on_text`` receives (None: not streamed)."""

    def call(
        pieces: list[str] | None, *, timeout: float = 5.0, request: ChatRequest = HELLO
    ) -> ChatReply:
        provider = http_adapter(adapter, server.url, api_key=KEY, timeout=timeout)
        return provider.complete(request, on_text=None if pieces is None else pieces.append)

    return call


# --- both adapters --------------------------------------------------------------------------


def test_text_arrives_in_order_while_the_server_still_sends(adapter, server, complete):
    stream, whole = WIRES[adapter]
    events = stream(PIECES)
    server.stream(*events, interval=0.1)
    seen: list[tuple[str, int]] = []  # each piece, and how many events the server had sent
    received: list[str] = []

    class Sink(list):
        def append(self, piece: str) -> None:
            received.append(piece)
            seen.append((piece, server.sent))

    streamed = complete(Sink())

    assert received == PIECES
    # The first piece was in hand long before the server sent its last event.
    assert seen[0][1] < len(events) - 2, seen
    body = server.last.body
    assert body["stream"] is True
    if adapter == "openai":
        assert body["stream_options"] == {"include_usage": True}

    server.reply(200, whole("".join(PIECES)))
    unstreamed = complete(None)
    assert "stream" not in server.last.body
    assert streamed == unstreamed
    assert streamed.usage == Usage(input_tokens=31, output_tokens=9)
    assert streamed.text == "".join(PIECES) and streamed.stop_reason == "end_turn"


def test_a_stream_cut_midway_is_connection_lost(adapter, server, complete):
    server.stream(*WIRES[adapter][0](PIECES)[:3], cut=True)
    pieces: list[str] = []

    with pytest.raises(AmbiguousFailure) as caught:
        complete(pieces)

    assert isinstance(caught.value, ProviderConnectionLost), caught.value
    assert "".join(pieces) in "".join(PIECES)


def test_a_stream_that_ends_before_the_reply_finished_is_malformed(adapter, server, complete):
    server.stream(*WIRES[adapter][0](PIECES)[:4])

    with pytest.raises(MalformedReply, match="ended before the reply finished"):
        complete([])


def test_a_stream_longer_than_the_timeout_is_cut_at_it(adapter, server, complete):
    server.stream(*WIRES[adapter][0](PIECES), interval=0.3)
    pieces: list[str] = []

    with pytest.raises(ProviderTimeout):
        complete(pieces, timeout=0.5)

    assert pieces == []  # the first piece was still 0.3 s into the stream


def test_an_error_status_is_classified_as_unstreamed(adapter, server, complete):
    server.reply(429, {"error": {"type": "rate_limit_error", "message": f"slow, {KEY}"}})

    with pytest.raises(ConfirmedRejection) as caught:
        complete([])

    assert caught.value.status == 429 and KEY not in str(caught.value)


def test_an_error_event_midstream_is_a_server_error(adapter, server, complete):
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    failure = (
        f"event: error\ndata: {json.dumps(error)}\n\n"
        if adapter == "anthropic"
        else f"data: {json.dumps({'error': error['error']})}\n\n"
    )
    server.stream(*WIRES[adapter][0](PIECES)[:3], failure)

    with pytest.raises(ProviderServerError, match="overloaded"):
        complete([])


def test_an_event_that_is_not_json_is_malformed(adapter, server, complete):
    server.stream(*WIRES[adapter][0](PIECES)[:2], "data: {not json\n\n")

    with pytest.raises(MalformedReply, match="not JSON"):
        complete([])


def test_a_server_that_ignores_stream_answers_in_one_piece(adapter, server, complete):
    server.reply(200, WIRES[adapter][1]("All of it."))
    pieces: list[str] = []

    assert complete(pieces).text == "All of it."
    assert pieces == ["All of it."]


def test_the_egress_policy_refuses_before_any_connection(adapter, server, complete, settings):
    settings.GARDEN_EGRESS_ALLOW_PROVIDERS = []

    with pytest.raises(EgressRefusedError):
        complete([])

    assert server.requests == []


# --- each adapter's own stream ------------------------------------------------------------


@pytest.mark.parametrize("adapter", ["openai"])
def test_openai_tool_calls_are_assembled_by_index(server, complete):
    call = {"type": "function", "function": {"name": "group__ask", "arguments": ""}}
    server.stream(
        openai_chunk({"role": "assistant", "content": "Asking "}),
        openai_chunk({"content": "both."}),
        openai_chunk({"tool_calls": [{"index": 0, "id": "call_a", **call}]}),
        openai_chunk({"tool_calls": [{"index": 1, "id": "call_b", **call}]}),
        openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"memb'}}]}),
        openai_chunk(
            {"tool_calls": [{"index": 1, "function": {"arguments": '{"member": "advisor"}'}}]}
        ),
        openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'er": "ledger"}'}}]}),
        openai_chunk({}, "tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 20}},
        "data: [DONE]\n\n",
    )
    pieces: list[str] = []

    reply = complete(pieces)

    assert pieces == ["Asking ", "both."]
    assert reply == ChatReply(
        content=(
            TextBlock("Asking both."),
            ToolCall("call_a", "group.ask", {"member": "ledger"}),
            ToolCall("call_b", "group.ask", {"member": "advisor"}),
        ),
        stop_reason="tool_use",
        usage=Usage(50, 20),
    )


@pytest.mark.parametrize("adapter", ["anthropic"])
def test_anthropic_blocks_tool_input_and_usage_are_assembled(server, complete):
    usage = {"input_tokens": 40, "cache_read_input_tokens": 10, "output_tokens": 1}
    tool = {"type": "tool_use", "id": "toolu_1", "name": "group__ask", "input": {}}
    server.stream(
        sse("message_start", {"message": {"usage": usage}}),
        block(0, {"type": "text", "text": ""}),
        delta(0, "text_delta", text="First."),
        sse("content_block_stop", {"index": 0}),
        block(1, {"type": "thinking", "thinking": ""}),
        delta(1, "thinking_delta", thinking="hm"),
        block(2, {"type": "text", "text": ""}),
        delta(2, "text_delta", text="Second."),
        block(3, tool),
        delta(3, "input_json_delta", partial_json='{"member": '),
        delta(3, "input_json_delta", partial_json='"ledger"}'),
        sse("content_block_stop", {"index": 3}),
        sse(
            "message_delta", {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 25}}
        ),
        sse("message_stop", {}),
    )
    pieces: list[str] = []

    reply = complete(pieces)

    assert "".join(pieces) == reply.text == "First.\nSecond."
    assert reply == ChatReply(
        content=(
            TextBlock("First."),
            TextBlock("Second."),
            ToolCall("toolu_1", "group.ask", {"member": "ledger"}),
        ),
        stop_reason="tool_use",
        usage=Usage(input_tokens=50, output_tokens=25),
    )
