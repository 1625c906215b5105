"""The owner's storage in a group: a member's write past GARDEN_MAX_STORAGE_BYTES_PER_OWNER
is the tool's STORAGE_FULL error and the request completes (a real worker); an owner's
message past it is 409. What a clear or a purge leaves of the team's documents stays in the
owner's list, counted and deletable: nothing is left that the owner cannot see."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from garden.models import Agent, Artifact, MemoryNote, Message
from garden.services.conversations import conversation_create, messages_move
from garden.storage import storage_usage, turn_bytes
from garden.tools import ToolContext, run_tool
from groups.models import GroupRequest
from groups.services.groups import group_clear, group_delete, group_purge_expired
from groups.services.requests import group_conversation_open, request_create
from tests.groups.conftest import make_group
from tests.support.driving import drive


def fill(user, nbytes: int) -> Artifact:
    return Artifact.objects.create(owner=user, title="Filler", content="", size=nbytes)


WRITE = {"name": "file.write", "arguments": {"title": "Budget", "content": "rent 900\n" * 200}}


def writing_team(user, name="Team"):
    """Concierge and @ledger, who writes one document and then says what came of it."""
    group = make_group(
        user,
        concierge_rules=[],
        members={
            "ledger": [
                {"after_tool_error": True, "reply": "Could not save the budget."},
                {"after_tool_result": True, "reply": "Saved the budget."},
                {"reply": {"tool_calls": [WRITE]}},
            ]
        },
        name=name,
    )
    Agent.objects.filter(owner=user, handle="ledger").update(enabled_tools=["file.write"])
    return group


@pytest.mark.django_db
def test_a_members_write_past_the_limit_is_its_tool_error_and_the_request_completes(
    owner, stranger, settings
):
    settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER = 50_000
    full, roomy = writing_team(owner), writing_team(stranger, name="Theirs")
    fill(owner, 49_000)
    mine = request_create(group=full, text="@ledger save the budget")
    theirs = request_create(group=roomy, text="@ledger save the budget")
    drive(mine)
    drive(theirs)
    assert mine.state == "completed" and theirs.state == "completed"
    result = Message.objects.get(request=mine, content__0__type="tool_result")
    block = result.content[0]
    assert block["is_error"] and block["content"].startswith("STORAGE_FULL: ")
    assert not Artifact.objects.filter(owner=owner, title="Budget").exists()
    said = Message.objects.filter(request=mine, speaker_agent__handle="ledger", kind="turn")
    assert "Could not save the budget." in [m.text for m in said]
    # The other owner's same request, beside it, writes its document.
    assert Artifact.objects.filter(owner=stranger, title="Budget").count() == 1
    ok = Message.objects.get(request=theirs, content__0__type="tool_result").content[0]
    assert not ok["is_error"]


@pytest.mark.django_db
def test_an_output_too_large_to_carry_is_not_kept_past_the_limit(owner, provider_server, settings):
    settings.GARDEN_EGRESS_ALLOW = ["127.0.0.1"]  # the fetched page is this test's server
    settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER = 60_000
    group = make_group(
        owner,
        concierge_rules=[],
        members={
            "ledger": [
                {"after_tool_error": True, "reply": "The page could not be kept."},
                {"after_tool_result": True, "reply": "Read it."},
                {
                    "reply": {
                        "tool_calls": [
                            {
                                "name": "http.fetch",
                                "arguments": {"url": f"{provider_server.url}/big"},
                            }
                        ]
                    }
                },
            ]
        },
    )
    Agent.objects.filter(owner=owner, handle="ledger").update(enabled_tools=["http.fetch"])
    group.room_cap_chars = 5_000
    group.save(update_fields=["room_cap_chars"])
    fill(owner, 20_000)
    provider_server.reply(200, b"x" * 50_000, headers={"Content-Type": "text/plain"})
    request = request_create(group=group, text="@ledger fetch the statement")
    drive(request)
    assert request.state == "completed"
    block = Message.objects.get(request=request, content__0__type="tool_result").content[0]
    assert block["is_error"] and block["content"].startswith("STORAGE_FULL: 50,0")
    assert len(block["content"]) < 1_000, "the refusal, not the output, is carried"
    assert list(Artifact.objects.filter(owner=owner).values_list("title", flat=True)) == ["Filler"]


@pytest.mark.django_db
def test_a_group_message_past_the_limit_is_409_and_writes_nothing(api, owner, stranger, settings):
    settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER = 10_000
    group = writing_team(owner)
    fill(owner, 9_990)
    response = api.post(f"/api/groups/{group.pk}/messages", {"text": "Plan next month"})
    assert response.status_code == 409 and response.json()["code"] == "STORAGE_FULL"
    assert not GroupRequest.objects.exists() and not Message.objects.exists()
    # Another owner's message, under the same limit, goes through.
    assert request_create(group=writing_team(stranger, name="S"), text="hi").state == "queued"


def team_documents(group):
    ledger = Agent.objects.get(owner=group.owner, handle="ledger")
    with transaction.atomic():
        thread = group_conversation_open(group=group)
    return [
        Artifact.objects.create(
            owner=group.owner,
            agent=ledger,
            conversation=thread,
            title=title,
            content=title * 10,
            size=len(title) * 10,
        )
        for title in ("Budget", "Chart")
    ]


def assert_all_listed_and_deletable(api, owner, made):
    body = api.get("/api/artifacts").json()
    listed = {r["id"]: r for r in body["artifacts"]}
    # Nothing the owner keeps is missing from their list.
    assert set(listed) == set(Artifact.objects.filter(owner=owner).values_list("pk", flat=True))
    for doc in made:
        row = listed[doc.pk]
        assert row["where"] == "no conversation" and row["conversation"] is None
        assert row["agent"]["handle"] == "ledger" and row["size"] == doc.size
    assert body["usage"]["artifacts"] == sum(d.size for d in made)
    for doc in made:
        assert api.delete(f"/api/artifacts/{doc.pk}").status_code == 204
    assert api.get("/api/artifacts").json()["artifacts"] == []
    assert storage_usage(owner_id=owner.pk).total == 0


@pytest.mark.django_db
def test_after_a_clear_the_teams_documents_are_listed_and_deletable(api, owner):
    group = writing_team(owner)
    made = team_documents(group)
    request_create(group=group, text="hello")
    assert storage_usage(owner_id=owner.pk).turns > 0
    group_clear(group=group)
    assert storage_usage(owner_id=owner.pk).turns == 0, "the turns' bytes went with them"
    assert_all_listed_and_deletable(api, owner, made)


@pytest.mark.django_db
def test_after_a_purge_the_teams_documents_are_listed_and_deletable(api, owner):
    group = writing_team(owner)
    made = team_documents(group)
    MemoryNote.objects.create(owner=owner, scope=group.memory_scope, text="the group's note")
    request_create(group=group, text="hello")
    deleted = timezone.now() - timedelta(minutes=5)
    group_delete(group=group, now=deleted)
    assert group_purge_expired(owner_id=owner.pk) == 1
    usage = storage_usage(owner_id=owner.pk)
    assert (usage.turns, usage.notes) == (0, 0), "the purge took the turns and notes along"
    assert_all_listed_and_deletable(api, owner, made)


@pytest.mark.django_db
def test_importing_a_note_past_the_limit_is_409_and_writes_nothing(api, owner, settings):
    settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER = 10_000
    group = writing_team(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    note = MemoryNote.objects.create(owner=owner, scope=f"private:{ledger.pk}", text="Rent 1,400")
    fill(owner, 9_990)
    response = api.post(f"/api/groups/{group.pk}/memory/import", {"note": note.pk})
    assert response.status_code == 409 and response.json()["code"] == "STORAGE_FULL"
    assert list(MemoryNote.objects.values_list("pk", flat=True)) == [note.pk]
    assert not Message.objects.exists()


@pytest.mark.django_db
def test_a_rollover_moves_a_queued_requests_bytes_with_its_turns(owner):
    group = writing_team(owner)
    first = request_create(group=group, text="first " * 50)
    second = request_create(group=group, text="second " * 80)
    old = first.conversation
    with transaction.atomic():
        new = conversation_create(owner=owner, group=group, title="next")
        messages_move(request_id=second.pk, from_conversation_id=old.pk, to_conversation_id=new.pk)
    for thread in (old, new):
        thread.refresh_from_db()
        turns = Message.objects.filter(conversation=thread)
        assert thread.stored_bytes == sum(turn_bytes(m.content) for m in turns) > 0
    assert storage_usage(owner_id=owner.pk).turns == old.stored_bytes + new.stored_bytes


@pytest.mark.django_db(transaction=True)
def test_writes_at_once_cannot_pass_the_limit_together(owner, settings):
    """Eight documents of 1,000 bytes written at once against room for three: the owner's
    lock serialises the checks, so exactly three are written, whatever the interleaving."""
    settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER = 3_500
    group = writing_team(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    with transaction.atomic():
        thread = group_conversation_open(group=group)
    ctx = ToolContext(
        owner_id=owner.pk, agent_id=ledger.pk, conversation_id=thread.pk, group_id=group.pk
    )
    start = threading.Barrier(8)

    def write(i: int):
        start.wait()
        try:
            return run_tool(ctx, "file.write", {"title": f"Doc {i}", "content": "x" * 1_000})
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(write, range(8)))
    codes = sorted(o.code or "ok" for o in outcomes)
    assert codes == ["STORAGE_FULL"] * 5 + ["ok"] * 3
    assert storage_usage(owner_id=owner.pk).artifacts == 3_000
