"""Scripted replies filled in from what their rule saw: a name captured after a phrase, the
error of a failed tool call, a field of a tool's result; a rule whose reply names what the
request does not hold does not match."""

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from garden.providers import (
    AccountConfig,
    ChatMessage,
    ChatRequest,
    ProviderConfigError,
    TextBlock,
    ToolCall,
    ToolResult,
    get_provider,
)
from garden.providers.script_fill import MAX_CAPTURE, as_handle, capture_after, readable

MAKE = {
    "when": "agent called|agent named",
    "capture": {"name": "called|named"},
    "reply": {
        "text": "Making {name} (@{name:handle}).",
        "tool_calls": [
            {
                "name": "platform.create_agent",
                "arguments": {"handle": "{name:handle}", "name": "{name}", "tags": ["{name}"]},
            }
        ],
    },
}


def provider(rules, **extra):
    return get_provider(
        AccountConfig(provider="scripted", model="s", options={"rules": rules, **extra})
    )


def ask(*messages):
    return ChatRequest(system="", messages=tuple(messages))


def user(text):
    return ChatMessage("user", (TextBlock(text),))


def after(*results):
    call = ChatMessage("assistant", (ToolCall("c1", "memory.remember", {}),))
    return ask(user("go"), call, ChatMessage("user", tuple(results)))


@pytest.mark.parametrize(
    ("text", "name", "handle"),
    [
        ("make me an agent called Tax Helper", "Tax Helper", "tax-helper"),
        ("Create an agent named Tax Helper, please.", "Tax Helper", "tax-helper"),
        ("create me an agent called “Tax Helper 2.0” today", "Tax Helper 2.0", "tax-helper-2-0"),
        ("make an agent named 'Zoë'", "Zoë", "zoe"),
    ],
)
def test_a_captured_name_fills_the_text_and_the_tool_calls_arguments(text, name, handle):
    reply = provider([MAKE]).complete(ask(user(text)))
    assert reply.text == f"Making {name} (@{handle})."
    assert reply.tool_calls[0].arguments == {"handle": handle, "name": name, "tags": [name]}


def test_a_rule_whose_phrase_has_nothing_after_it_does_not_match():
    p = provider([MAKE], default="Say: make me an agent called <name>.")
    assert p.complete(ask(user("make me an agent called"))).text.startswith("Say:")
    assert p.complete(ask(user("make me an agent called ?!"))).text.startswith("Say:")
    # The phrase starts a word: "renamed" holds no "named".
    p = provider([{"capture": {"x": "named"}, "reply": "{x}"}], default="none")
    assert p.complete(ask(user("I renamed it"))).text == "none"


def test_an_error_rule_says_the_error_and_a_result_rule_never_answers_an_error():
    p = provider(
        [
            {"after_tool_error": True, "reply": "I couldn't note that: {error}"},
            {"after_tool_result": True, "reply": "Noted."},
        ]
    )
    failed = ToolResult(
        "c1", "TOOL_NOT_AVAILABLE: @ledger has no tool 'memory.remember' here.", True
    )
    assert p.complete(after(failed)).text == (
        "I couldn't note that: TOOL_NOT_AVAILABLE: @ledger has no tool 'memory.remember' here."
    )
    assert p.complete(after(ToolResult("c1", "Remembered (note 3)."))).text == "Noted."


def test_error_only_fills_after_an_error_so_the_next_rule_answers_otherwise():
    p = provider([{"reply": "Failed: {error}"}, {"reply": "fine"}])
    assert p.complete(after(ToolResult("c1", "ok"))).text == "fine"
    assert p.complete(ask(user("hi"))).text == "fine"


def test_a_results_field_fills_only_when_the_result_holds_it():
    p = provider(
        [
            {
                "after_tool_result": True,
                "reply": "Made {result.agent.name} (@{result.agent.handle}).",
            },
            {"after_tool_result": True, "reply": "The tool said: {result}"},
        ]
    )
    made = json.dumps({"agent": {"id": 7, "handle": "tax-helper", "name": "Tax Helper"}})
    assert p.complete(after(ToolResult("c1", made))).text == "Made Tax Helper (@tax-helper)."
    other = json.dumps({"group": {"name": "Trips"}})
    assert p.complete(after(ToolResult("c1", other))).text == f"The tool said: {other}"


def test_a_platform_tools_json_error_reads_as_its_code_and_message():
    content = json.dumps({"error": {"code": "HANDLE_TAKEN", "message": "@tax is taken."}})
    assert readable(content) == "HANDLE_TAKEN: @tax is taken."
    p = provider([{"after_tool_error": True, "reply": "Not made: {error}"}])
    assert p.complete(after(ToolResult("c1", content, True))).text == (
        "Not made: HANDLE_TAKEN: @tax is taken."
    )


def test_braces_that_name_no_placeholder_stay_as_written():
    p = provider([{"reply": 'Use {"a": 1} or {other} or {Name}'}])
    assert p.complete(ask(user("x"))).text == 'Use {"a": 1} or {other} or {Name}'


@pytest.mark.parametrize(
    "capture", [{"Bad-Name": "called"}, {"name": ""}, {f"n{i}": "x" for i in range(6)}]
)
def test_a_capture_outside_the_schema_is_refused(capture):
    with pytest.raises(ProviderConfigError, match="scripted options are invalid"):
        provider([{"capture": capture, "reply": "x"}])


@pytest.mark.timeout(20)
def test_a_capture_is_linear_in_a_long_text():
    text = "called " * 20_000 + "x" * 50_000
    assert capture_after("called|named", text) is not None


@given(st.text(max_size=300), st.text(min_size=1, max_size=20))
def test_a_capture_is_short_single_spaced_text_or_nothing(text, phrase):
    value = capture_after(phrase, text)
    assert value is None or (0 < len(value) <= MAX_CAPTURE and value == " ".join(value.split()))


@given(st.text(max_size=200))
def test_a_handle_is_empty_or_a_valid_handle(value):
    handle = as_handle(value)
    assert handle == "" or re.fullmatch(r"[a-z0-9](?:[-a-z0-9]{0,38}[a-z0-9])?", handle)
