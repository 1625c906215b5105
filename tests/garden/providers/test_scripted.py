"""The scripted provider: deterministic replies by rule, tool calls with stable ids, errors."""

import pytest

from garden.providers import (
    AccountConfig,
    ChatMessage,
    ChatRequest,
    ConfirmedRejection,
    ProviderTimeout,
    TextBlock,
    ToolCall,
    ToolResult,
    get_provider,
)


def provider(rules, **extra):
    return get_provider(AccountConfig(provider="scripted", model="s", options={"rules": rules, **extra}))


def ask(*messages):
    return ChatRequest(system="", messages=tuple(messages))


def user(text):
    return ChatMessage("user", (TextBlock(text),))


def test_first_matching_rule_answers_and_default_otherwise():
    p = provider([{"when": "budget", "reply": "B"}, {"when": "spend", "reply": "S"}], default="D")
    assert p.complete(ask(user("the spending budget"))).text == "B"
    assert p.complete(ask(user("spend it"))).text == "S"
    assert p.complete(ask(user("hello"))).text == "D"


def test_tool_calls_have_stable_ids_for_the_same_request():
    p = provider([{"reply": {"text": "asking", "tool_calls": [
        {"name": "group.ask", "arguments": {"member": "ledger", "request": "sum"}},
        {"name": "group.ask", "arguments": {"member": "advisor", "request": "plan"}}]}}])
    a, b = p.complete(ask(user("go"))), p.complete(ask(user("go")))
    assert [c.id for c in a.tool_calls] == [c.id for c in b.tool_calls]
    assert len({c.id for c in a.tool_calls}) == 2
    assert a.tool_calls[1].arguments == {"member": "advisor", "request": "plan"}
    assert p.complete(ask(user("other"))).tool_calls[0].id != a.tool_calls[0].id


def test_after_tool_result_rules():
    p = provider([{"after_tool_result": True, "reply": "concluded"}, {"reply": "first"}])
    call = ChatMessage("assistant", (ToolCall("c1", "group.ask", {}),))
    result = ChatMessage("user", (ToolResult("c1", "done"),))
    assert p.complete(ask(user("go"))).text == "first"
    assert p.complete(ask(user("go"), call, result)).text == "concluded"


def test_scripted_errors_are_classified():
    with pytest.raises(ConfirmedRejection):
        provider([{"error": "rejected"}]).complete(ask(user("x")))
    with pytest.raises(ProviderTimeout):
        provider([{"error": "timeout"}]).complete(ask(user("x")))
