"""AnthropicProvider against a real local HTTP server: wire mapping and replies (the failure
classes it shares with the OpenAI adapter are in test_http.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from garden.providers import get_provider
from garden.providers.anthropic import API_VERSION, AnthropicProvider
from garden.providers.types import (
    AccountConfig,
    AmbiguousFailure,
    ArtifactRef,
    ChatMessage,
    ChatRequest,
    MalformedReply,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)

KEY = "sk-ant-test-secret"

ASK = ToolSpec(
    name="group.ask",
    description="Ask another agent a question.",
    parameters={"type": "object", "properties": {"question": {"type": "string"}}},
)
READ = ToolSpec(
    name="files.read",
    description="Read a file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)

HELLO = ChatRequest(
    system="You are terse.",
    messages=(ChatMessage("user", (TextBlock("hi"),)),),
    max_tokens=64,
)


def text_reply(text: str = "hello") -> dict[str, object]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 11, "output_tokens": 3},
    }


MakeProvider = Callable[..., AnthropicProvider]


@pytest.fixture
def make(server) -> Iterator[MakeProvider]:
    made: list[AnthropicProvider] = []

    def factory(*, base_url: str | None = None, api_key: str = KEY, timeout: float = 5.0):
        provider = AnthropicProvider(
            AccountConfig(
                provider="anthropic",
                model="claude-test",
                base_url=server.url if base_url is None else base_url,
                api_key=api_key,
                timeout=timeout,
            )
        )
        made.append(provider)
        return provider

    yield factory
    for provider in made:
        provider.close()


# --- success and wire mapping ---------------------------------------------------------------


def test_two_tool_calls_round_trip_with_dotted_names(server, make):
    arguments_one = {"question": "Ça va? \u2603", "options": [1, 2.5, None, True]}
    arguments_two = {"path": "notes/a b.md"}
    server.reply(
        200,
        {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "Checking two things."},
                {"type": "tool_use", "id": "toolu_1", "name": "group__ask", "input": arguments_one},
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "files__read",
                    "input": arguments_two,
                },
            ],
            "stop_reason": "tool_use",
            "usage": {
                "input_tokens": 100,
                "cache_creation_input_tokens": 15,
                "cache_read_input_tokens": 5,
                "output_tokens": 30,
            },
        },
    )
    request = ChatRequest(
        system="Be useful.",
        messages=(ChatMessage("user", (TextBlock("go"),)),),
        tools=(ASK, READ),
        max_tokens=256,
    )

    reply = make().complete(request)

    assert reply.text == "Checking two things."
    assert reply.tool_calls == (
        ToolCall(id="toolu_1", name="group.ask", arguments=arguments_one),
        ToolCall(id="toolu_2", name="files.read", arguments=arguments_two),
    )
    assert len(reply.content) == 3  # the thinking block has no neutral form
    assert reply.stop_reason == "tool_use"
    assert reply.usage == Usage(input_tokens=120, output_tokens=30)

    sent = server.last
    assert sent.method == "POST"
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == API_VERSION == "2023-06-01"
    assert "authorization" not in sent.headers
    assert sent.body == {
        "model": "claude-test",
        "max_tokens": 256,
        "system": "Be useful.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "go"}]}],
        "tools": [
            {
                "name": "group__ask",
                "description": ASK.description,
                "input_schema": ASK.parameters,
            },
            {
                "name": "files__read",
                "description": READ.description,
                "input_schema": READ.parameters,
            },
        ],
    }


def test_tool_use_turn_and_results_stay_paired_and_adjacent(server, make):
    server.reply(200, text_reply("done"))
    history = (
        ChatMessage("user", (TextBlock("look this up"), ArtifactRef("art-9", "document", "Plan"))),
        ChatMessage(
            "assistant",
            (
                TextBlock("Asking around."),
                ToolCall(id="c1", name="group.ask", arguments={"question": "when?"}),
                ToolCall(id="c2", name="files.read", arguments={"path": "a.md"}),
            ),
        ),
        ChatMessage(
            "user",
            (
                TextBlock("also, hurry"),
                ToolResult(call_id="c1", content="tomorrow"),
                ToolResult(call_id="c2", content="no such file", is_error=True),
            ),
        ),
    )

    reply = make().complete(ChatRequest(system="", messages=history, tools=(ASK, READ)))

    assert reply.text == "done"
    assert reply.stop_reason == "end_turn"
    assert "system" not in server.last.body
    assert server.last.body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look this up"},
                {"type": "text", "text": "[artifact art-9 (document): Plan]"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Asking around."},
                {
                    "type": "tool_use",
                    "id": "c1",
                    "name": "group__ask",
                    "input": {"question": "when?"},
                },
                {"type": "tool_use", "id": "c2", "name": "files__read", "input": {"path": "a.md"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c1",
                    "content": "tomorrow",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "c2",
                    "content": "no such file",
                    "is_error": True,
                },
                {"type": "text", "text": "also, hurry"},
            ],
        },
    ]


def test_text_reply_without_key_or_usage(server, make):
    body = text_reply("plain")
    del body["usage"]
    server.reply(200, body)

    reply = make(api_key="").complete(HELLO)

    assert reply.content == (TextBlock("plain"),)
    assert reply.usage == Usage()
    assert "x-api-key" not in server.last.headers
    assert "tools" not in server.last.body


def test_base_url_with_version_segment_is_not_doubled(server, make):
    server.reply(200, text_reply())

    make(base_url=f"{server.url}/v1/").complete(HELLO)

    assert server.last.path == "/v1/messages"


def test_default_base_url_and_registry():
    config = AccountConfig(provider="anthropic", model="claude-test")
    provider = get_provider(config)
    try:
        assert isinstance(provider, AnthropicProvider)
        assert provider._url() == "https://api.anthropic.com/v1/messages"
    finally:
        provider.close()


# --- reply shapes (failure classes: test_http.py) ------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        json.dumps({"type": "message"}).encode(),
        json.dumps({"content": [{"text": "no type"}]}).encode(),
        json.dumps({"content": [{"type": "tool_use", "id": "t", "name": "x"}]}).encode(),
        json.dumps(
            {"content": [{"type": "tool_use", "id": "t", "name": "x", "input": "{}"}]}
        ).encode(),
    ],
    ids=["no-content", "block-without-type", "no-input", "input-not-object"],
)
def test_a_2xx_without_the_message_shape_is_malformed(server, make, body):
    server.reply(200, body)

    with pytest.raises(MalformedReply) as caught:
        make().complete(HELLO)

    assert isinstance(caught.value, AmbiguousFailure)
