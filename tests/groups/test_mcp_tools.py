"""A group's member uses its owner's MCP server through a real worker, PostgreSQL, Redis and a
real MCP server on 127.0.0.1: a read-only tool runs without approval and its result reaches
the member's next model call paired with its call; a destructive one suspends the request,
is approved with edited arguments, and the server receives exactly one call — the edited
one."""

from __future__ import annotations

import pytest

from garden.services.agents import agent_create, agent_update
from garden.services.mcp import mcp_server_create
from groups.models import Approval, GroupRequest
from tests.conftest import wait_for
from tests.groups.conftest import make_group
from tests.groups.helpers import on_server, tool_names
from tests.mcp_server import mcp_server
from tests.support.providers import openai_reply

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def tracker(settings):
    settings.GARDEN_EGRESS_ALLOW_MCP = ["127.0.0.1"]
    with mcp_server() as server:
        yield server


def state_of(request) -> str:
    request.refresh_from_db()
    return request.state


def test_a_member_reads_freely_and_a_destructive_call_runs_once_with_the_edited_arguments(
    celery_worker_thread, api, owner, provider_server, tracker
):
    mcp_server_create(owner=owner, name="tracker", url=tracker.url)
    clerk = agent_create(
        owner=owner,
        handle="clerk",
        name="Clerk",
        model_account=None,
        enabled_tools=["mcp.tracker.lookup", "mcp.tracker.delete_record"],
    )
    on_server(owner, clerk, provider_server)
    group = make_group(
        owner,
        concierge_rules=[
            {
                "turn": 0,
                "reply": {
                    "text": "",
                    "tool_calls": [
                        {
                            "name": "group.ask",
                            "arguments": {"member": "clerk", "request": "Tidy record 7."},
                        }
                    ],
                },
            },
            {"after_tool_result": True, "reply": {"text": "Clerk tidied the records."}},
        ],
        members={"clerk": []},
    )
    provider_server.reply(200, openai_reply(None, [("c1", "mcp.tracker.lookup", {"query": "7"})]))
    provider_server.reply(
        200, openai_reply(None, [("c2", "mcp.tracker.delete_record", {"record_id": 7})])
    )
    provider_server.reply(200, openai_reply("Record 8 is gone; 7 stays."))

    posted = api.post(f"/api/groups/{group.pk}/messages", {"text": "Please tidy the tracker."})
    assert posted.status_code == 202, posted.json()
    request = GroupRequest.objects.get(pk=posted.json()["request"]["id"])
    wait_for(lambda: state_of(request) == "awaiting_approval", timeout=30)

    # The read-only tool ran at once, without approval; its result reached Clerk's next call,
    # paired with its call.
    assert tracker.calls == [("lookup", {"query": "7"})]
    second = provider_server.requests[1].body
    assert "mcp__tracker__lookup" in tool_names(second)
    messages = second["messages"]
    call_at = next(i for i, m in enumerate(messages) if m.get("tool_calls"))
    assert messages[call_at]["tool_calls"][0]["id"] == "c1"
    assert messages[call_at + 1]["role"] == "tool"
    assert messages[call_at + 1]["tool_call_id"] == "c1"
    assert "record for 7: balance 1400" in messages[call_at + 1]["content"]

    # The destructive one waits, named in words with its arguments.
    approval = Approval.objects.get(request=request, status="pending")
    listed = api.get("/api/approvals").json()["approvals"]
    card = next(a for a in listed if a["id"] == approval.pk)
    assert card["label"] == (
        "Clerk wants to run delete_record on the MCP server tracker (record_id: 7)"
    )
    assert card["action"] == {"name": "mcp.tracker.delete_record", "arguments": {"record_id": 7}}
    assert tracker.names() == ["lookup"]

    refused = api.post(
        f"/api/approvals/{approval.pk}/decide",
        {"decision": "approve", "arguments": {"record_id": "eight"}},
    )
    assert refused.status_code == 400
    assert refused.json()["code"] == "INVALID_ARGUMENTS"
    decided = api.post(
        f"/api/approvals/{approval.pk}/decide",
        {"decision": "approve", "arguments": {"record_id": 8}},
    )
    assert decided.status_code == 200, decided.json()
    wait_for(lambda: state_of(request) in GroupRequest.FINISHED_STATES, timeout=30)
    assert request.state == "completed", request.outcome

    assert tracker.calls == [("lookup", {"query": "7"}), ("delete_record", {"record_id": 8})]
    approval.refresh_from_db()
    assert approval.action["arguments"] == {"record_id": 7}
    assert approval.approved_arguments == {"record_id": 8}
    # Clerk was told the owner changed the arguments, and what ran.
    third = provider_server.requests[2].body["messages"]
    result = next(m for m in third if m.get("role") == "tool" and m["tool_call_id"] == "c2")
    assert "changed the arguments" in result["content"]
    assert "deleted record 8" in result["content"]


def test_never_and_always_override_the_annotations(owner, tracker, settings):
    """The owner's policy wins over what the server says of its tools."""
    from garden.services.accounts import scripted_account_for
    from garden.tools import needs_approval

    mcp_server_create(owner=owner, name="tracker", url=tracker.url)
    clerk = agent_create(
        owner=owner,
        handle="clerk",
        name="Clerk",
        model_account=scripted_account_for(owner=owner),
        enabled_tools=["mcp.tracker.lookup", "mcp.tracker.delete_record"],
    )
    agent_update(
        agent=clerk,
        tool_approvals={"mcp.tracker.lookup": "always", "mcp.tracker.delete_record": "never"},
    )
    clerk.refresh_from_db()

    def asks(name):
        return needs_approval(
            name=name,
            approval_tools=clerk.approval_tools,
            tool_approvals=clerk.tool_approvals,
            owner_id=owner.pk,
        )

    assert asks("mcp.tracker.lookup") and not asks("mcp.tracker.delete_record")


def test_an_approved_picture_is_kept_on_the_rooms_canvas(owner, tracker):
    """In the agent's own room: the picture an approved MCP call returns is an image artifact
    of the thread, tagged with the agent, which the room's Canvas lists; the call's result
    names it."""
    from garden.models import Artifact, Message
    from groups.services.approvals import approval_decide, approval_execute
    from tests.groups.conftest import scripted
    from tests.groups.helpers import one_to_one
    from tests.support.driving import drive

    mcp_server_create(owner=owner, name="tracker", url=tracker.url)
    painter = agent_create(
        owner=owner,
        handle="painter",
        name="Painter",
        model_account=scripted(
            owner,
            "painter",
            [
                {"after_tool_result": True, "reply": "Here it is."},
                {
                    "when": "draw",
                    "reply": {
                        "text": "",
                        "tool_calls": [{"name": "mcp.tracker.picture", "arguments": {}}],
                    },
                },
            ],
        ),
        enabled_tools=["mcp.tracker.picture"],
        tool_approvals={"mcp.tracker.picture": "always"},
    )
    request = one_to_one(owner, painter, "Please draw the chart.")
    drive(request, "awaiting_approval", "completed", "failed")
    assert request.state == "awaiting_approval"
    assert tracker.calls == []
    approval = Approval.objects.get(request=request)
    approval_decide(user=owner, approval_id=approval.pk, decision="approve")
    assert approval_execute(approval_id=approval.pk) == "executed"
    drive(request)
    assert request.state == "completed", request.outcome
    assert tracker.names() == ["picture"]
    picture = Artifact.objects.get(conversation_id=request.conversation_id, kind="image")
    assert picture.agent_id == painter.pk
    from dashboard.selectors import group_artifacts

    canvas = group_artifacts(owner=owner, group=None, conversation_id=request.conversation_id)
    assert [a.pk for a in canvas] == [picture.pk]
    result = next(
        b
        for m in Message.objects.filter(request=request)
        for b in m.content
        if b["type"] == "tool_result"
    )
    assert f"[picture kept as artifact {picture.pk}]" in result["content"]


def test_a_tool_the_agent_does_not_have_asks_nothing_and_runs_nothing(owner, tracker):
    """A model that names one of its owner's MCP tools the agent was not given gets
    TOOL_NOT_AVAILABLE: no approval card, no call."""
    from garden.models import Message
    from tests.groups.conftest import scripted
    from tests.groups.helpers import one_to_one
    from tests.support.driving import drive

    mcp_server_create(owner=owner, name="tracker", url=tracker.url)
    clerk = agent_create(
        owner=owner,
        handle="clerk",
        name="Clerk",
        model_account=scripted(
            owner,
            "clerk",
            [
                {"after_tool_result": True, "reply": "I could not."},
                {
                    "when": "delete",
                    "reply": {
                        "text": "",
                        "tool_calls": [
                            {"name": "mcp.tracker.delete_record", "arguments": {"record_id": 1}}
                        ],
                    },
                },
            ],
        ),
        enabled_tools=["mcp.tracker.lookup"],
    )
    request = one_to_one(owner, clerk, "Please delete record 1.")
    drive(request)
    assert request.state == "completed", request.outcome
    assert not Approval.objects.filter(request=request).exists()
    assert tracker.calls == []
    results = [
        b
        for m in Message.objects.filter(request=request)
        for b in m.content
        if b["type"] == "tool_result"
    ]
    assert [r["content"].split(":")[0] for r in results] == ["TOOL_NOT_AVAILABLE"]
