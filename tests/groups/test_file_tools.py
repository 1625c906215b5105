"""file.list and file.read: a member reads another member's document by reference, a page at
a time within the room's cap, and never an artifact of another group or owner."""

from __future__ import annotations

import pytest
from django.db import transaction

from garden.models import Agent, Artifact, Message
from garden.tools import run_tool
from groups.services.requests import group_conversation_open, request_create
from tests.groups.conftest import make_group
from tests.support.driving import drive
from tests.support.tools import in_group

PLAN = "Savings plan\n" + "Save 800 a month by standing order on payday. " * 40


def document(group, *, agent, title="Savings plan", content=PLAN, **extra) -> Artifact:
    with transaction.atomic():
        conversation = group_conversation_open(group=group)
    return Artifact.objects.create(
        owner=group.owner,
        agent=agent,
        conversation=conversation,
        title=title,
        content=content,
        size=len(content),
        **extra,
    )


@pytest.fixture
def team(owner):
    group = make_group(owner, concierge_rules=[], members={"ledger": [], "advisor": []})
    other = make_group(owner, concierge_rules=[], members={"scout": []}, name="Other")
    agents = {a.handle: a for a in Agent.objects.filter(owner=owner)}
    return group, other, agents


@pytest.mark.django_db
def test_read_pages_a_document_within_the_rooms_share(team):
    group, _, agents = team
    doc = document(group, agent=agents["ledger"])
    ctx = in_group(group, agents["advisor"], output_chars=1_000)
    first = run_tool(ctx, "file.read", {"artifact": doc.pk})
    assert not first.is_error and len(first.content) <= 1_000
    assert first.content.startswith(f"artifact {doc.pk} · document · 'Savings plan' · by @ledger")
    assert "Savings plan\nSave 800" in first.content
    assert "[continues:" in first.content
    offset = int(first.content.rsplit("read with offset ", 1)[1].rstrip("]"))
    pages, text = [first], first.content.split(":\n", 1)[1].rsplit("\n[continues", 1)[0]
    while "[continues:" in pages[-1].content:
        page = run_tool(ctx, "file.read", {"artifact": doc.pk, "offset": offset})
        pages.append(page)
        body = page.content.split(":\n", 1)[1]
        text += body.rsplit("\n[", 1)[0]
        if "read with offset " in page.content:
            offset = int(page.content.rsplit("read with offset ", 1)[1].rstrip("]"))
    assert text == PLAN and pages[-1].content.endswith("[end of the document]")
    short = run_tool(ctx, "file.read", {"artifact": doc.pk, "length": 12})
    assert "characters 0 to 12:\nSavings plan\n[continues" in short.content


@pytest.mark.django_db
def test_another_groups_or_owners_artifact_reads_like_none(team, stranger):
    group, other, agents = team
    theirs = document(other, agent=agents["scout"], title="Scouting")
    stranger_group = make_group(stranger, concierge_rules=[], members={"spy": []}, name="S")
    foreign = document(
        stranger_group, agent=Agent.objects.get(owner=stranger, handle="spy"), title="Secret"
    )
    ctx = in_group(group, agents["advisor"])
    for artifact in (theirs, foreign):
        out = run_tool(ctx, "file.read", {"artifact": artifact.pk})
        assert out.is_error and out.code == "ARTIFACT_NOT_FOUND"
        assert artifact.title not in out.content
    listed = run_tool(ctx, "file.list", {})
    assert listed.content == "No documents here yet."
    # The group's own shows, newest first, with its reference.
    mine = document(group, agent=agents["ledger"])
    chart = document(group, agent=agents["ledger"], title="Chart", kind="chart")
    lines = run_tool(ctx, "file.list", {}).content.splitlines()
    assert lines[0].startswith(f"artifact {chart.pk} · chart · 'Chart'")
    assert lines[1].startswith(f"artifact {mine.pk} · document · 'Savings plan'")
    assert run_tool(ctx, "file.list", {"query": "chart"}).content.count("artifact ") == 1


@pytest.mark.django_db
def test_bad_reads_are_named(team):
    group, _, agents = team
    picture = document(group, agent=agents["ledger"], title="Photo", mime_type="image/png")
    ctx = in_group(group, agents["advisor"])
    assert run_tool(ctx, "file.read", {"artifact": picture.pk}).code == "NOT_TEXT"
    for args in ({}, {"artifact": "12"}, {"artifact": 0}, {"artifact": 1, "offset": -1}):
        assert run_tool(ctx, "file.read", args).code == "INVALID_TOOL_ARGUMENTS"


@pytest.mark.django_db
def test_a_member_reads_another_members_document_in_a_request(owner):
    group = make_group(
        owner,
        concierge_rules=[
            {"after_tool_result": True, "reply": "The advisor has read the plan."},
            {
                "reply": {
                    "tool_calls": [
                        {
                            "name": "group.ask",
                            "arguments": {"member": "advisor", "request": "Read the plan."},
                        }
                    ]
                }
            },
        ],
        members={"ledger": [], "advisor": []},
    )
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    doc = document(group, agent=ledger)
    advisor = Agent.objects.get(owner=owner, handle="advisor")
    advisor.enabled_tools = ["file.read"]
    advisor.save(update_fields=["enabled_tools"])
    account = advisor.model_account
    account.options = {
        "rules": [
            {"after_tool_result": True, "reply": "Read it: save 800 a month."},
            {
                "reply": {
                    "tool_calls": [
                        {"name": "file.read", "arguments": {"artifact": doc.pk, "length": 60}}
                    ]
                }
            },
        ]
    }
    account.save(update_fields=["options"])
    request = request_create(group=group, text="What does the plan say?")
    drive(request, "completed")
    result = Message.objects.get(
        request=request, content__0__type="tool_result", speaker_agent=advisor
    )
    body = result.content[0]["content"]
    assert body.startswith(f"artifact {doc.pk} ·") and "Savings plan\nSave 800" in body
    assert not result.content[0]["is_error"]
