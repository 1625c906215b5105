"""An MCP server's hostile input schemas (issue #43): refused by name when its tools are
listed (many patterns, nested $refs that expand exponentially, a $ref cycle, deep
composition), validated within GARDEN_TOOL_SCHEMA_SECONDS when one was stored before those
limits (SCHEMA_TOO_SLOW), and never validated at all by a decision on an approval already
decided — on PostgreSQL."""

from __future__ import annotations

import signal
import time
from contextlib import contextmanager

import pytest

from garden import mcp_client
from garden.errors import ServiceError
from garden.models import Agent, McpServer, Message
from garden.tools import call_refusal, get_tool
from garden.tools.mcp_catalog import listed_as_json
from groups.models import Approval
from groups.services.approvals import approval_decide
from groups.services.requests import request_create
from tests.support.driving import drive

WRITE = {"name": "file.write", "arguments": {"title": "Plan", "content": "Save."}}


class RanTooLong(BaseException):
    """Not an Exception: no ``except Exception`` in the code under test swallows it."""


@contextmanager
def at_most(seconds: float):
    """Fail the block (RanTooLong) if it runs longer than ``seconds`` of wall-clock time."""

    def expired(signum, frame):
        raise RanTooLong(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def many_patterns(count: int = 600) -> dict:
    return {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "pattern": "^(a|a)+$"} for i in range(count)},
    }


def nested_refs(depth: int = 30) -> dict:
    """About 2 KB that, expanded, is 2**depth branches of ``anyOf``."""
    defs = {
        f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]}
        for i in range(depth)
    }
    defs[f"a{depth}"] = {"type": "string"}
    return {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/a0"}}}


def cyclic() -> dict:
    node = {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}
    return {
        "type": "object",
        "$defs": {"node": node},
        "properties": {"x": {"$ref": "#/$defs/node"}},
    }


def deep_composition(depth: int = 12) -> dict:
    inner: dict = {"type": "string"}
    for _ in range(depth):
        inner = {"anyOf": [inner, {"not": {"type": "null"}}]}
    return {"type": "object", "properties": {"x": inner}}


FINE = {"type": "object", "properties": {"query": {"type": "string", "pattern": "^[a-z]+$"}}}


def listed(name: str, schema: dict) -> mcp_client.ListedTool:
    return mcp_client.ListedTool(name=name, description="", input_schema=schema, annotations={})


def test_hostile_schemas_are_refused_by_name_at_listing_and_a_fine_tool_is_kept():
    tools = [
        listed("patterns", many_patterns()),
        listed("refs", nested_refs()),
        listed("cycle", cyclic()),
        listed("composed", deep_composition()),
        listed("fine", FINE),
    ]
    with at_most(5):
        kept = {t["name"]: t for t in listed_as_json(tools, "evil")}
    assert "patterns" in kept["patterns"]["unusable"], kept["patterns"]
    assert "parts" in kept["refs"]["unusable"] or "nests" in kept["refs"]["unusable"]
    assert "cycle" in kept["cycle"]["unusable"]
    assert "allOf/anyOf/oneOf/not" in kept["composed"]["unusable"]
    for name in ("patterns", "refs", "cycle", "composed"):
        assert kept[name]["input_schema"] == {}  # nothing of it is kept to be applied later
    assert "unusable" not in kept["fine"] and kept["fine"]["input_schema"] == FINE


def stored(owner, schemas: dict[str, dict]) -> McpServer:
    """An owner's server whose tools were stored before the listing limits (written directly:
    no listing would keep them now)."""
    return McpServer.objects.create(
        owner=owner,
        name="evil",
        url="http://127.0.0.1:9/mcp",
        tools=[
            {"name": name, "description": "", "input_schema": schema, "annotations": {}}
            for name, schema in schemas.items()
        ],
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    "schema,arguments",
    [
        (nested_refs(), {"x": 5}),
        (many_patterns(), {f"p{i}": "a" * 28 + "b" for i in range(600)}),
    ],
    ids=["nested_refs", "many_patterns"],
)
def test_a_stored_hostile_schema_is_validated_within_the_budget(owner, settings, schema, arguments):
    settings.GARDEN_TOOL_SCHEMA_SECONDS = 0.2
    stored(owner, {"hostile": schema})
    tool = get_tool("mcp.evil.hostile", owner_id=owner.pk)
    assert tool is not None
    started = time.monotonic()
    with at_most(10):
        refused = call_refusal(tool, arguments)
    assert refused is not None and refused.code == "SCHEMA_TOO_SLOW", refused
    assert time.monotonic() - started < 3


@pytest.mark.django_db
def test_deciding_a_decided_approval_answers_at_once_without_validating(
    group_factory, owner, settings
):
    settings.GARDEN_TOOL_SCHEMA_SECONDS = 5  # a validation would be seen taking this long
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Done."},
            {"reply": {"tool_calls": [WRITE]}},
        ],
        members={},
    )
    Agent.objects.filter(pk=group.coordinator_id).update(
        enabled_tools=["file.write"], approval_tools=["file.write"]
    )
    request = request_create(group=group, text="Write the plan.")
    drive(request, "awaiting_approval")
    approval = Approval.objects.get(request=request)
    approval_decide(user=owner, approval_id=approval.pk, decision="reject")
    # Its action now names a tool whose stored schema would take exponential time to apply.
    stored(owner, {"hostile": nested_refs()})
    Approval.objects.filter(pk=approval.pk).update(
        action={"name": "mcp.evil.hostile", "arguments": {"x": "a"}}
    )
    started = time.monotonic()
    with at_most(10):
        for _ in range(10):
            with pytest.raises(ServiceError) as refused:
                approval_decide(
                    user=owner, approval_id=approval.pk, decision="approve", arguments={"x": 5}
                )
            assert refused.value.code == "APPROVAL_ALREADY_DECIDED"
        again = approval_decide(user=owner, approval_id=approval.pk, decision="reject")
    assert again.repeated
    assert time.monotonic() - started < 2


@pytest.mark.django_db
def test_changed_arguments_against_a_slow_schema_are_refused_with_a_named_code(
    group_factory, owner, settings
):
    settings.GARDEN_TOOL_SCHEMA_SECONDS = 0.2
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Done."},
            {"reply": {"tool_calls": [WRITE]}},
        ],
        members={},
    )
    Agent.objects.filter(pk=group.coordinator_id).update(
        enabled_tools=["file.write"], approval_tools=["file.write"]
    )
    request = request_create(group=group, text="Write the plan.")
    drive(request, "awaiting_approval")
    approval = Approval.objects.get(request=request)
    stored(owner, {"hostile": nested_refs()})
    Approval.objects.filter(pk=approval.pk).update(
        action={"name": "mcp.evil.hostile", "arguments": {"x": "a"}}
    )
    with at_most(10), pytest.raises(ServiceError) as refused:
        approval_decide(user=owner, approval_id=approval.pk, decision="approve", arguments={"x": 5})
    assert refused.value.code == "SCHEMA_TOO_SLOW"
    approval.refresh_from_db()
    assert approval.status == "pending"  # nothing written


def tool_results(request, handle: str) -> dict[str, str]:
    """What each of ``handle``'s tool calls in ``request`` was answered, by tool name."""
    names, answers = {}, {}
    for message in Message.objects.filter(request=request, speaker_agent__handle=handle):
        for block in message.content:
            if block["type"] == "tool_call":
                names[block["id"]] = block["name"]
            elif block["type"] == "tool_result":
                answers[block["call_id"]] = block["content"]
    return {names[call_id]: content for call_id, content in answers.items()}


@pytest.mark.django_db
def test_a_members_calls_past_the_schema_budget_are_refused_by_name_and_the_request_goes_on(
    group_factory, owner, settings
):
    settings.GARDEN_TOOL_SCHEMA_SECONDS = 1e-9  # group.request_help's own schema takes longer
    help_call = {
        "name": "group.request_help",
        "arguments": {"member": "advisor", "request": "Check my plan."},
    }
    hostile_call = {"name": "mcp.evil.hostile", "arguments": {"x": 5}}
    group = group_factory(
        concierge_rules=[{"reply": "Concluded without a check."}],
        members={
            "ledger": [
                {"after_tool_result": True, "reply": "Neither call could be checked."},
                {"reply": {"tool_calls": [help_call, hostile_call]}},
            ],
            "advisor": [{"reply": "Plan checked."}],
        },
    )
    stored(owner, {"hostile": nested_refs()})
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    ledger.delegation_allowlist.add(Agent.objects.get(owner=owner, handle="advisor"))
    Agent.objects.filter(pk=ledger.pk).update(enabled_tools=["mcp.evil.hostile"])
    request = request_create(group=group, text="@ledger check the figures.")
    with at_most(10):
        drive(request, limit=40)
    answered = tool_results(request, "ledger")
    assert set(answered) == {"group.request_help", "mcp.evil.hostile"}, answered
    assert all(a.startswith("SCHEMA_TOO_SLOW: ") for a in answered.values()), answered
    assert request.state == "completed", request.outcome
    spoke = Message.objects.filter(request=request, kind="turn", speaker_kind="agent")
    assert "advisor" not in {m.speaker_agent.handle for m in spoke}  # never queued
    assert "Neither call could be checked." in [m.text for m in spoke.filter(speaker_agent=ledger)]


@pytest.mark.django_db
def test_an_ask_past_the_schema_budget_is_refused_by_name_and_the_coordinator_goes_on(
    group_factory, owner, settings
):
    settings.GARDEN_TOOL_SCHEMA_SECONDS = 1e-9
    ask = {"name": "group.ask", "arguments": {"member": "ledger", "request": "Figures."}}
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Concluded alone."},
            {"reply": {"tool_calls": [ask]}},
        ],
        members={"ledger": [{"reply": "Figures."}]},
    )
    request = request_create(group=group, text="Go.")
    with at_most(10):
        drive(request, limit=40)
    (answer,) = tool_results(request, "concierge").values()
    assert answer.startswith("SCHEMA_TOO_SLOW: "), answer
    assert request.state == "completed", request.outcome
    assert not Message.objects.filter(request=request, speaker_agent__handle="ledger").exists()
