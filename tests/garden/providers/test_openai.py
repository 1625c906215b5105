"""OpenAIProvider against a real local HTTP server: wire mapping and replies (the failure
classes it shares with the Anthropic adapter are in test_http.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from garden.providers import get_provider
from garden.providers._wire import ToolNames
from garden.providers.openai import OpenAIProvider
from garden.providers.types import (
    AccountConfig,
    AmbiguousFailure,
    ArtifactRef,
    ChatMessage,
    ChatRequest,
    MalformedReply,
    ProviderTimeout,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from tests.garden.providers.httpserver import ScriptedServer

KEY = "sk-test-secret"

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
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
    }


MakeProvider = Callable[..., OpenAIProvider]


@pytest.fixture
def make(server) -> Iterator[MakeProvider]:
    made: list[OpenAIProvider] = []

    def factory(*, base_url: str | None = None, api_key: str = KEY, timeout: float = 5.0):
        provider = OpenAIProvider(
            AccountConfig(
                provider="openai",
                model="gpt-test",
                base_url=f"{server.url}/v1" if base_url is None else base_url,
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
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": "Checking two things.",
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {
                                    "name": "group__ask",
                                    "arguments": json.dumps(arguments_one),
                                },
                            },
                            {
                                "id": "call_2",
                                "type": "function",
                                "function": {
                                    "name": "files__read",
                                    "arguments": json.dumps(arguments_two),
                                },
                            },
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 120, "completion_tokens": 30},
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
        ToolCall(id="call_1", name="group.ask", arguments=arguments_one),
        ToolCall(id="call_2", name="files.read", arguments=arguments_two),
    )
    assert reply.stop_reason == "tool_use"
    assert reply.usage == Usage(input_tokens=120, output_tokens=30)

    sent = server.last
    assert sent.method == "POST"
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body["model"] == "gpt-test"
    assert sent.body["max_tokens"] == 256
    assert sent.body["messages"] == [
        {"role": "system", "content": "Be useful."},
        {"role": "user", "content": "go"},
    ]
    assert sent.body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "group__ask",
                "description": ASK.description,
                "parameters": ASK.parameters,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "files__read",
                "description": READ.description,
                "parameters": READ.parameters,
            },
        },
    ]


def test_tool_call_turn_and_results_stay_paired_and_adjacent(server, make):
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
        ChatMessage("assistant", (ToolCall(id="c3", name="group.ask", arguments={}),)),
        ChatMessage("user", (ToolResult(call_id="c3", content="ok"),)),
    )

    reply = make().complete(ChatRequest(system="", messages=history, tools=(ASK, READ)))

    assert reply.text == "done"
    assert reply.stop_reason == "end_turn"
    assert server.last.body["messages"] == [
        {"role": "user", "content": "look this up\n[artifact art-9 (document): Plan]"},
        {
            "role": "assistant",
            "content": "Asking around.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "group__ask", "arguments": '{"question": "when?"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "files__read", "arguments": '{"path": "a.md"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "tomorrow"},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: no such file"},
        {"role": "user", "content": "also, hurry"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c3",
                    "type": "function",
                    "function": {"name": "group__ask", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c3", "content": "ok"},
    ]


def test_text_reply_without_key_or_usage(server, make):
    body = text_reply("plain")
    del body["usage"]
    server.reply(200, body)

    reply = make(api_key="").complete(HELLO)

    assert reply.content == (TextBlock("plain"),)
    assert reply.usage == Usage()
    assert "authorization" not in server.last.headers
    assert "tools" not in server.last.body


def test_declared_name_with_double_underscore_maps_back_exactly(server, make):
    legacy = ToolSpec(name="legacy__tool", description="old", parameters={"type": "object"})
    server.reply(
        200,
        {
            "choices": [
                {
                    "message": {
                        "content": None,
                        "tool_calls": [
                            {"id": "a", "function": {"name": "legacy__tool", "arguments": ""}},
                            {"id": "b", "function": {"name": "made__up", "arguments": "{}"}},
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ]
        },
    )

    reply = make().complete(ChatRequest(system="", messages=HELLO.messages, tools=(legacy,)))

    assert [call.name for call in reply.tool_calls] == ["legacy__tool", "made.up"]
    assert reply.tool_calls[0].arguments == {}


def test_default_base_url_and_registry():
    config = AccountConfig(provider="openai", model="gpt-test")
    provider = get_provider(config)
    try:
        assert isinstance(provider, OpenAIProvider)
        assert provider._url() == "https://api.openai.com/v1/chat/completions"
    finally:
        provider.close()


@given(st.lists(st.from_regex(r"[a-z][a-z0-9_.-]{0,20}", fullmatch=True), unique=True))
def test_declared_tool_names_round_trip(names):
    wires = {name.replace(".", "__") for name in names}
    if len(wires) < len(names):
        return  # two declared names that collide on the wire are refused, not mapped
    mapping = ToolNames(ToolSpec(name, "", {}) for name in names)
    for name in names:
        wire = mapping.to_wire(name)
        assert "." not in wire
        assert mapping.from_wire(wire) == name


def test_colliding_tool_names_are_refused_before_sending(server, make):
    tools = (ToolSpec("a.b", "", {}), ToolSpec("a__b", "", {}))
    with pytest.raises(ValueError):
        make().complete(ChatRequest(system="", messages=HELLO.messages, tools=tools))
    assert server.requests == []


# --- the shared client and reply shapes (failure classes: test_http.py) ---------------------


def test_calls_reuse_one_connection_carry_no_cookies_and_keep_their_own_timeout():
    """Each call builds a new adapter (as a step does); the process's shared client keeps the
    connection to the provider open between them, so later calls skip the handshake, and
    keeps nothing an answer sets for the next call (which may be another owner's)."""
    server = ScriptedServer(keep_alive=True)
    try:

        def adapter(timeout: float) -> OpenAIProvider:
            return OpenAIProvider(
                AccountConfig(
                    provider="openai",
                    model="gpt-test",
                    api_key=KEY,
                    base_url=f"{server.url}/v1",
                    timeout=timeout,
                )
            )

        server.reply(200, text_reply("one"), headers={"Set-Cookie": "edge=owner-a; Path=/"})
        server.reply(200, text_reply("two"))
        server.reply(200, text_reply("three"))
        for text in ("one", "two", "three"):
            assert adapter(5.0).complete(HELLO).text == text
        assert len({r.peer for r in server.requests}) == 1
        assert [r.headers.get("cookie") for r in server.requests] == [None, None, None]
        server.reply(200, text_reply(), delay=3.0)
        with pytest.raises(ProviderTimeout):
            adapter(0.3).complete(HELLO)
        server.reply(200, text_reply("after"))
        assert adapter(5.0).complete(HELLO).text == "after"
    finally:
        server.close()


@pytest.mark.parametrize(
    "body",
    [
        json.dumps({"id": "x"}).encode(),
        json.dumps({"choices": []}).encode(),
        json.dumps({"choices": [{"finish_reason": "stop"}]}).encode(),
        json.dumps(
            {"choices": [{"message": {"tool_calls": [{"id": "a", "function": {}}]}}]}
        ).encode(),
    ],
    ids=["no-choices", "empty-choices", "no-message", "no-name"],
)
def test_a_2xx_without_the_chat_completion_shape_is_malformed(server, make, body):
    server.reply(200, body)

    with pytest.raises(MalformedReply) as caught:
        make().complete(HELLO)

    assert isinstance(caught.value, AmbiguousFailure)


def test_bad_json_arguments_are_malformed(server, make):
    server.reply(
        200,
        {
            "choices": [
                {
                    "message": {
                        "tool_calls": [
                            {"id": "a", "function": {"name": "group__ask", "arguments": "{oops"}}
                        ]
                    }
                }
            ]
        },
    )

    with pytest.raises(MalformedReply):
        make().complete(ChatRequest(system="", messages=HELLO.messages, tools=(ASK,)))
