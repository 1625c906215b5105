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
    return get_provider(
        AccountConfig(provider="scripted", model="s", options={"rules": rules, **extra})
    )


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
    p = provider(
        [
            {
                "reply": {
                    "text": "asking",
                    "tool_calls": [
                        {"name": "group.ask", "arguments": {"member": "ledger", "request": "sum"}},
                        {
                            "name": "group.ask",
                            "arguments": {"member": "advisor", "request": "plan"},
                        },
                    ],
                }
            }
        ]
    )
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


# --- bounded: a scripted account cannot stall a shared worker --------------------------------


@pytest.mark.timeout(20)
def test_when_is_plain_text_so_no_pattern_can_backtrack():
    # As a regular expression this pair takes longer than the universe has; as text, no time.
    p = provider([{"when": "^(a+)+$", "reply": "matched"}], default="no match")
    assert p.complete(ask(user("a" * 50_000 + "!"))).text == "no match"
    assert p.complete(ask(user("literal ^(a+)+$ inside"))).text == "matched"


def test_when_lists_phrases_separated_by_bars_matched_ignoring_case():
    p = provider([{"when": "spend | Save|budget", "reply": "money"}], default="other")
    assert p.complete(ask(user("How much can I SAVE?"))).text == "money"
    assert p.complete(ask(user("spending"))).text == "money"
    assert p.complete(ask(user("hello"))).text == "other"


def test_a_delay_past_the_timeout_ends_as_a_timeout_at_the_timeout():
    p = get_provider(
        AccountConfig(
            provider="scripted",
            model="s",
            timeout=0.2,
            options={"delay": 1_000_000, "default": "late"},
        )
    )
    with pytest.raises(ProviderTimeout):
        p.complete(ask(user("hi")))


@pytest.mark.parametrize(
    "options",
    [
        {"rules": "not a list"},
        {"rules": [{"when": "x", "shell": "rm -rf /"}]},
        {"rules": [{"when": "x" * 501}]},
        {"delay": -1},
        {"unknown": True},
        {"rules": [{"reply": {"tool_calls": [{"arguments": {}}]}}]},
    ],
)
def test_a_script_outside_its_schema_is_refused_by_name(options):
    from garden.providers import ProviderConfigError

    with pytest.raises(ProviderConfigError, match="scripted options are invalid"):
        get_provider(AccountConfig(provider="scripted", model="s", options=options))
