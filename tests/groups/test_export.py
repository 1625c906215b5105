"""A room's history taken away (groups/export, groups/api/exports.py): a group's every thread and
an agent's 1:1 conversation, as JSON valid against schema/conversation-export.schema.json and as
Markdown naming every speaker; owner-only, a read that writes nothing, capped by size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from jsonschema import Draft202012Validator

from garden.models import Agent, Artifact, Conversation, Message
from garden.services.conversations import message_append, text_block
from groups.export import history
from groups.export.records import collect
from groups.models import Approval, GroupRequest
from groups.services.approvals import approval_decide, approval_execute
from groups.services.requests import request_create
from tests.groups.helpers import one_to_one, writer
from tests.support.api import assert_refused, sign_in

pytestmark = pytest.mark.django_db

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schema" / "conversation-export.schema.json"
SCHEMA = json.loads(SCHEMA_PATH.read_text())

WRITE = {"name": "file.write", "arguments": {"title": "Savings plan", "content": "Save 800."}}
ASK_LEDGER = {"name": "group.ask", "arguments": {"member": "ledger", "request": "Write it down."}}


def validated(document: dict) -> dict:
    Draft202012Validator.check_schema(SCHEMA)
    errors = sorted(Draft202012Validator(SCHEMA).iter_errors(document), key=str)
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]
    return document


@pytest.fixture
def named_owner(owner):
    """The owner as the dashboard names them: their turns are signed so in an export."""
    owner.first_name = "Robin"
    owner.save(update_fields=["first_name"])
    return owner


@pytest.fixture
def planned_group(group_factory, named_owner, drive):
    """A group whose history is real: Concierge asks Ledger, Ledger's file.write waits for an
    approval that is given; a second request's write is refused. Two decided approvals, one
    artifact, the coordinator's, a member's and the owner's turns, activity lines."""
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "The plan is handled."},
            {"reply": {"tool_calls": [ASK_LEDGER]}},
        ],
        members={
            "ledger": [
                {"after_tool_error": True, "reply": "Not written."},
                {"after_tool_result": True, "reply": "Saved the plan."},
                {"reply": {"text": "Writing it.", "tool_calls": [WRITE]}},
            ],
            "advisor": [{"reply": "Advice."}],
        },
        name="Household finances",
    )
    Agent.objects.filter(owner=named_owner, handle="ledger").update(
        enabled_tools=["file.write"], approval_tools=["file.write"]
    )
    for decision in ("approve", "reject"):
        request = request_create(group=group, text=f"Write down the savings plan ({decision}).")
        drive(request, "awaiting_approval")
        approval = Approval.objects.get(request=request)
        approval_decide(user=named_owner, approval_id=approval.pk, decision=decision)
        if decision == "approve":
            assert approval_execute(approval_id=approval.pk) == "executed"
        drive(request)
        assert request.state == "completed", request.outcome
    return group


def export(api, path: str, fmt: str):
    response = api.get(path, {"format": fmt})
    assert response.status_code == 200, response.content
    return response


def test_the_groups_history_as_json_holds_every_turn_speaker_and_decision(
    api, planned_group, named_owner
):
    response = export(api, f"/api/groups/{planned_group.pk}/export", "json")
    assert response["Content-Type"] == "application/json; charset=utf-8"
    disposition = response["Content-Disposition"]
    assert disposition.startswith("attachment; filename=")
    assert "household-finances" in disposition and disposition.endswith('.json"')
    document = validated(json.loads(response.content))
    assert (document["scope"], document["group"], document["owner"]) == (
        "group",
        planned_group.pk,
        "Robin",
    )
    assert [m["agent"]["handle"] for m in document["members"]] == [
        "concierge",
        "ledger",
        "advisor",
    ]

    threads = list(Conversation.objects.filter(group=planned_group).order_by("id"))
    assert [c["id"] for c in document["conversations"]] == [t.pk for t in threads]
    exported = {(c["id"], t["seq"]): t for c in document["conversations"] for t in c["turns"]}
    stored = Message.objects.filter(conversation__group=planned_group).select_related(
        "speaker_agent"
    )
    assert set(exported) == {(m.conversation_id, m.seq) for m in stored}
    for message in stored:
        turn = exported[(message.conversation_id, message.seq)]
        assert (turn["kind"], turn["text"]) == (message.kind, message.text)
        assert turn["speaker"]["kind"] == message.speaker_kind
        if message.speaker_agent_id:
            assert turn["speaker"]["agent"] == {
                "id": message.speaker_agent_id,
                "handle": message.speaker_agent.handle,
                "name": message.speaker_agent.name,
            }
        elif message.speaker_kind == "owner":
            assert turn["speaker"]["name"] == "Robin"
    kinds = {t["kind"] for t in exported.values()}
    assert {"turn", "activity"} <= kinds
    speakers = {t["speaker"]["name"] for t in exported.values()}
    assert {"Robin", "Concierge", "Ledger"} <= speakers

    calls = [c for t in exported.values() for c in t["tool_calls"]]
    assert WRITE["arguments"] in [c["arguments"] for c in calls if c["name"] == "file.write"]
    results = [r for t in exported.values() for r in t["tool_results"]]
    assert any("Wrote artifact" in r["content"] and not r["is_error"] for r in results)

    approvals = [a for c in document["conversations"] for a in c["approvals"]]
    decided = {
        a.pk: a for a in Approval.objects.filter(group=planned_group).select_related("decided_by")
    }
    assert {a["id"] for a in approvals} == set(decided) and len(decided) == 2
    for entry in approvals:
        row = decided[entry["id"]]
        assert (entry["status"], entry["surface"], entry["decided_by"]) == (
            row.status,
            "dashboard",
            "Robin",
        )
        assert entry["decided_at"] == row.decided_at.isoformat()
        assert entry["action"] == WRITE and entry["agent"]["agent"]["handle"] == "ledger"
        assert entry["tool_call_id"] in {c["id"] for c in calls}
    assert sorted(a["status"] for a in approvals) == ["approved", "rejected"]

    requests = [r for c in document["conversations"] for r in c["requests"]]
    assert [r["state"] for r in requests] == ["completed", "completed"]
    assert {r["id"] for r in requests} == set(
        GroupRequest.objects.filter(group=planned_group).values_list("pk", flat=True)
    )

    plan = Artifact.objects.get(owner=named_owner, title="Savings plan")
    assert document["artifacts"] == [
        {
            "id": plan.pk,
            "kind": plan.kind,
            "title": "Savings plan",
            "mime_type": plan.mime_type,
            "size": plan.size,
            "conversation": plan.conversation_id,
            "agent": plan.agent_id,
            "created_at": plan.created_at.isoformat(),
        }
    ]
    assert "Save 800." not in json.dumps(document["artifacts"])


def test_the_groups_history_as_markdown_names_every_speaker(api, planned_group):
    response = export(api, f"/api/groups/{planned_group.pk}/export", "markdown")
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"].endswith('.md"')
    text = response.content.decode()
    assert text.startswith("# Household finances\n")
    names = set(
        Message.objects.filter(conversation__group=planned_group, speaker_agent__isnull=False)
        .values_list("speaker_agent__name", flat=True)
        .distinct()
    )
    assert {"Concierge", "Ledger"} <= names
    for name in [*names, "Robin"]:
        assert f"**{name}**" in text, name
    assert "Tool call `file.write`" in text
    assert "approved by Robin on dashboard" in text
    assert "rejected by Robin on dashboard" in text
    assert "Tool result of `file.write`: Wrote artifact" in text
    assert "Savings plan" in text and "Save 800." in text  # the call's arguments, shown


def test_an_agents_conversation_exports_in_the_same_shape(api, named_owner, drive):
    ledger = writer(named_owner)
    request = one_to_one(named_owner, ledger, "Write the plan.")
    drive(request, "awaiting_approval")
    approval = Approval.objects.get(request=request)
    decided = api.post(f"/api/approvals/{approval.pk}/decide", {"decision": "reject"})
    assert decided.status_code == 200, decided.content
    drive(request)
    conversation = request.conversation

    document = validated(
        json.loads(export(api, f"/api/conversations/{conversation.pk}/export", "json").content)
    )
    assert document["scope"] == "conversation" and document["group"] is None
    assert document["agent"]["agent"] == {"id": ledger.pk, "handle": "ledger", "name": "Ledger"}
    [thread] = document["conversations"]
    assert [t["seq"] for t in thread["turns"]] == list(
        conversation.messages.order_by("seq").values_list("seq", flat=True)
    )
    assert {t["speaker"]["name"] for t in thread["turns"]} >= {"Robin", "Ledger"}
    [entry] = thread["approvals"]
    assert (entry["status"], entry["decided_by"], entry["surface"]) == (
        "rejected",
        "Robin",
        "dashboard",
    )
    assert [r["state"] for r in thread["requests"]] == ["completed"]

    markdown = export(api, f"/api/conversations/{conversation.pk}/export", "markdown")
    text = markdown.content.decode()
    assert "**Robin**" in text and "**Ledger** (@ledger)" in text
    assert "rejected by Robin on dashboard" in text and "Not written." in text


def test_without_a_format_the_export_is_json(api, group_factory):
    group = group_factory(concierge_rules=[], members={})
    response = api.get(f"/api/groups/{group.pk}/export")
    assert response.status_code == 200
    document = validated(json.loads(response.content))
    assert document["conversations"] == [] and document["artifacts"] == []


def test_another_owners_room_is_not_found(planned_group, stranger, named_owner):
    thread = Conversation.objects.create(owner=named_owner, agent=writer(named_owner, "scribe"))
    other = sign_in(stranger)
    for path in (
        f"/api/groups/{planned_group.pk}/export",
        f"/api/conversations/{thread.pk}/export",
    ):
        for fmt in ("json", "markdown"):
            assert_refused(other.get(path, {"format": fmt}), 404, "NOT_FOUND")
    own = sign_in(named_owner)
    assert_refused(own.get("/api/groups/999999/export"), 404, "NOT_FOUND")
    # A group's thread is no 1:1 conversation: it is exported with its group.
    group_thread = Conversation.objects.filter(group=planned_group).first()
    assert_refused(own.get(f"/api/conversations/{group_thread.pk}/export"), 404, "NOT_FOUND")


@pytest.mark.parametrize("fmt", ["xml", "JSON", "md", "markdown "])
def test_a_format_other_than_json_or_markdown_is_refused_by_name(api, group_factory, fmt):
    group = group_factory(concierge_rules=[], members={})
    refused = api.get(f"/api/groups/{group.pk}/export", {"format": fmt})
    assert_refused(refused, 400, "EXPORT_FORMAT_INVALID", field="format")
    assert refused["Content-Type"] == "application/json"


def test_an_export_writes_nothing(api, planned_group):
    with CaptureQueriesContext(connection) as queries:
        for fmt in ("json", "markdown"):
            export(api, f"/api/groups/{planned_group.pk}/export", fmt)
    statements = [q["sql"].lstrip().split(None, 1)[0].upper() for q in queries.captured_queries]
    assert statements and set(statements) <= {"SELECT", "SAVEPOINT", "RELEASE"}, set(statements)


def test_turns_are_read_a_page_at_a_time_and_none_is_missed(api, planned_group, monkeypatch):
    monkeypatch.setattr(history, "EXPORT_PAGE", 3)
    thread = Conversation.objects.filter(group=planned_group).get()
    assert thread.messages.count() > 3 * 2
    with CaptureQueriesContext(connection) as queries:
        document = json.loads(export(api, f"/api/groups/{planned_group.pk}/export", "json").content)
    assert [t["seq"] for t in document["conversations"][0]["turns"]] == list(
        thread.messages.order_by("seq").values_list("seq", flat=True)
    )
    pages = [q for q in queries.captured_queries if 'FROM "garden_message"' in q["sql"]]
    assert len(pages) == thread.messages.count() // 3 + 1


def test_every_thread_of_the_group_is_exported_oldest_first(api, planned_group, named_owner):
    open_thread = Conversation.objects.get(group=planned_group)
    open_thread.status = Conversation.Status.CLOSED
    open_thread.save(update_fields=["status"])
    newer = Conversation.objects.create(
        owner=named_owner, group=planned_group, carried_summary="We planned the savings."
    )
    ledger = Agent.objects.get(owner=named_owner, handle="ledger")
    message_append(
        conversation_id=newer.pk,
        speaker_kind="agent",
        speaker_agent=ledger,
        content=[text_block("A new month.")],
    )
    document = validated(
        json.loads(export(api, f"/api/groups/{planned_group.pk}/export", "json").content)
    )
    assert [(c["id"], c["status"]) for c in document["conversations"]] == [
        (open_thread.pk, "closed"),
        (newer.pk, "open"),
    ]
    assert document["conversations"][1]["carried_summary"] == "We planned the savings."
    text = export(api, f"/api/groups/{planned_group.pk}/export", "markdown").content.decode()
    assert "> We planned the savings." in text and "A new month." in text


def test_a_history_past_the_cap_is_refused_before_it_is_read(
    api, planned_group, settings, monkeypatch
):
    stored = sum(
        Conversation.objects.filter(group=planned_group).values_list("stored_bytes", flat=True)
    )
    assert stored > 0
    settings.GARDEN_EXPORT_MAX_BYTES = stored - 1

    def never(*args, **kwargs):
        raise AssertionError("no turn is read past the cap")

    monkeypatch.setattr(history._Reader, "turns", never)
    for fmt in ("json", "markdown"):
        body = assert_refused(
            api.get(f"/api/groups/{planned_group.pk}/export", {"format": fmt}),
            413,
            "EXPORT_TOO_LARGE",
        )
        assert "GARDEN_EXPORT_MAX_BYTES" in body["message"]


def test_a_document_that_grows_past_the_cap_is_refused(api, planned_group, settings):
    stored = sum(
        Conversation.objects.filter(group=planned_group).values_list("stored_bytes", flat=True)
    )
    # The stored turns fit; the document, with its speakers, requests and approvals, does not.
    settings.GARDEN_EXPORT_MAX_BYTES = stored + 10
    assert_refused(
        api.get(f"/api/groups/{planned_group.pk}/export", {"format": "json"}),
        413,
        "EXPORT_TOO_LARGE",
    )


def test_collect_stops_at_the_first_chunk_past_the_cap():
    from garden.errors import ServiceError

    taken = []

    def chunks():
        for piece in ("ab", "cd", "ef", "gh"):
            taken.append(piece)
            yield piece

    assert collect(iter(["é", "a"]), max_bytes=3) == "éa".encode()
    with pytest.raises(ServiceError) as refused:
        collect(chunks(), max_bytes=5)
    assert (refused.value.code, refused.value.status) == ("EXPORT_TOO_LARGE", 413)
    assert taken == ["ab", "cd", "ef"]


def test_exports_have_their_own_tighter_rate(api, group_factory, settings):
    settings.GARDEN_THROTTLE_RATES = {**settings.GARDEN_THROTTLE_RATES, "exports": "2/min"}
    group = group_factory(concierge_rules=[], members={})
    path = f"/api/groups/{group.pk}/export"
    assert [api.get(path).status_code for _ in range(2)] == [200, 200]
    body = assert_refused(api.get(path, {"format": "markdown"}), 429, "THROTTLED")
    assert "exports" in body["message"]
    assert api.get(f"/api/groups/{group.pk}").status_code == 200  # reads go on
