"""Every live event the code sends validates against the serializer its type registered
(garden/event_schema.py), and every registered type is sent by some path driven here: a new
event type without a serializer, or a payload field added without its serializer, fails.
(Zulip's rule, ``zerver/lib/event_schema.py``.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from garden import events
from garden.event_schema import EventSchemaError, event_errors, event_types
from garden.models import Agent
from garden.services.agents import agent_create
from groups.models import Approval, GroupRequest
from groups.services.approvals import approval_decide, approval_execute
from groups.services.requests import request_create
from groups.tasks import after_request
from operator_messages.driver import _emit_tend_finished
from tests.garden.providers.httpserver import ScriptedServer
from tests.groups.conftest import make_group, scripted
from tests.groups.helpers import WRITE, on_server, one_to_one, openai_stream
from tests.operator_messages.helpers import GARDEN, start
from tests.support.driving import drive
from tests.support.providers import openai_reply

pytestmark = pytest.mark.django_db

ASK = {"name": "group.ask", "arguments": {"member": "ledger", "request": "Write the plan."}}


@pytest.fixture
def sent(monkeypatch) -> list[dict[str, Any]]:
    """Every event handed to garden.events, whether it waits for commit or not."""
    captured: list[dict[str, Any]] = []
    for name in ("send_event_on_commit", "send_event_without_waiting_for_commit"):
        original = getattr(events, name)

        def record(*, channel: str, event: dict[str, Any], _original=original) -> None:
            captured.append(event)
            _original(channel=channel, event=event)

        monkeypatch.setattr(events, name, record)
    return captured


def _a_group_asks_waits_for_approval_and_rolls_over(owner) -> None:
    """message.created, request.state, approval.created, approval.decided, conversation.rolled."""
    group = make_group(
        owner,
        concierge_rules=[
            {"when": "rolling over", "reply": "SUMMARY: the plan is agreed."},
            {"after_tool_result": True, "reply": "Done."},
            {"when": "write it", "reply": {"tool_calls": [ASK]}},
            {"reply": "Noted."},
        ],
        members={
            "ledger": [
                {"after_tool_result": True, "reply": "Written."},
                {"reply": {"tool_calls": [WRITE]}},
            ]
        },
    )
    Agent.objects.filter(owner=owner, handle="ledger").update(
        enabled_tools=["file.write"], approval_tools=["file.write"]
    )
    group.room_cap_chars = 3_000
    group.save(update_fields=["room_cap_chars"])
    first = request_create(group=group, text="Plan the savings. " + "p" * 2_900)
    drive(first, limit=40)
    second = request_create(group=group, text="Write it down.")
    drive(second, GroupRequest.State.AWAITING_APPROVAL)
    approval = Approval.objects.get(request=second)
    approval_decide(user=owner, approval_id=approval.pk, decision="approve")
    assert approval_execute(approval_id=approval.pk) == "executed"
    drive(second, limit=40)
    assert second.state == GroupRequest.State.COMPLETED, second.outcome
    assert after_request(second.pk) == "rolled"


def _a_group_changed_and_deleted(api, owner) -> None:
    """group.updated, group.deleted."""
    group = make_group(owner, concierge_rules=[], members={})
    assert api.patch(f"/api/groups/{group.pk}", {"name": "Renamed"}).status_code == 200
    assert api.delete(f"/api/groups/{group.pk}").status_code == 200


def _a_reply_streamed(owner) -> None:
    """request.draft: a reply streamed slowly enough for drafts to be pushed."""
    agent = agent_create(
        owner=owner, handle="streamer", name="Streamer", model_account=scripted(owner, "s", [])
    )
    server = ScriptedServer()
    try:
        on_server(owner, agent, server)
        reply = openai_reply("The rent is 1,400 a month, paid on the first.")
        server.stream(*openai_stream(reply, pieces=5), interval=0.25)
        request = one_to_one(owner, agent, "What is the rent?")
        drive(request)
    finally:
        server.close()


def _a_reply_notified(owner) -> None:
    """notification.reply: what the worker does for a request that ended (here called in this
    thread, as the ending's commit never comes inside the test's transaction)."""
    from notifications.services import replies_notify

    group = make_group(owner, concierge_rules=[{"reply": "All done."}], members={}, name="Solo")
    request = request_create(group=group, text="Anything?")
    drive(request)
    assert replies_notify(request_id=request.pk)["browser"] == 1


def _a_tend_run_finished(settings, tmp_path) -> None:
    """tend.finished."""
    settings.GARDEN_RUNTIME_ROOT = tmp_path / "runtime"
    settings.GARDEN_NAME = GARDEN
    _, run, _ = start("tend")
    _emit_tend_finished(run)


def test_every_event_the_code_sends_validates_and_every_type_is_sent(
    sent, api, owner, loopback_providers, settings, tmp_path
):
    _a_group_asks_waits_for_approval_and_rolls_over(owner)
    _a_group_changed_and_deleted(api, owner)
    _a_reply_streamed(owner)
    _a_reply_notified(owner)
    _a_tend_run_finished(settings, tmp_path)

    for event in sent:
        assert event_errors(events._checked(event)) == [], event
    # A type sent and not registered, or registered and never sent here, fails.
    assert {e["type"] for e in sent} == set(event_types())


def test_a_payload_field_added_without_its_serializer_fails_where_it_is_sent(monkeypatch, owner):
    from garden import payloads

    group = make_group(owner, concierge_rules=[], members={})
    original = payloads.message_payload
    monkeypatch.setattr(payloads, "message_payload", lambda m: {**original(m), "mood": "calm"})
    with pytest.raises(EventSchemaError, match=r"message\.created\.message\.mood: not declared"):
        request_create(group=group, text="Hello")


def test_a_nested_payload_field_added_without_its_serializer_fails(monkeypatch, owner):
    from groups import payloads

    group = make_group(owner, concierge_rules=[], members={})
    original = payloads.request_payload

    def with_extra(request, **kw):
        payload = original(request, **kw)
        payload["budget"]["spare_calls"] = 3
        return payload

    monkeypatch.setattr(payloads, "request_payload", with_extra)
    with pytest.raises(EventSchemaError, match=r"request\.state\.request\.budget\.spare_calls"):
        request_create(group=group, text="Hello")


def test_an_event_type_without_a_serializer_fails():
    with pytest.raises(EventSchemaError, match="not registered"):
        events.send_event_on_commit(channel="group-1", event={"type": "group.renamed", "id": 1})


def test_a_field_missing_or_of_another_type_fails():
    rolled = {"type": "conversation.rolled", "old": 1, "conversation": 2}
    assert event_errors(rolled) == []
    assert event_errors({"type": "conversation.rolled", "old": 1}) == [
        "conversation.rolled.conversation: missing"
    ]
    assert event_errors({**rolled, "old": "1"}) == [
        "conversation.rolled.old: '1' is not a IntegerField"
    ]


# --- one payload per entity: the API, the events and the room page show the same shape ------


def _room_data(page: bytes) -> dict[str, Any]:
    text = page.decode()
    return json.loads(
        text.split('<script id="room-data" type="application/json">')[1].split("</script>")[0]
    )


def test_a_group_reads_the_same_from_the_api_its_events_and_its_room_page(sent, api, owner):
    group = make_group(owner, concierge_rules=[], members={"ledger": []})
    assert api.patch(f"/api/groups/{group.pk}", {"name": "Renamed"}).status_code == 200
    from_api = api.get(f"/api/groups/{group.pk}").json()
    (changed,) = [e for e in sent if e["type"] == "group.updated"]
    assert events._checked(changed)["group"] == from_api
    assert _room_data(api.get(f"/dashboard/groups/{group.pk}/").content)["group"] == from_api


def test_a_turn_reads_the_same_from_the_api_and_its_event(sent, api, owner):
    group = make_group(owner, concierge_rules=[], members={})
    posted = api.post(f"/api/groups/{group.pk}/messages", {"text": "Hello"}).json()
    (created,) = [e for e in sent if e["type"] == "message.created"]
    room = api.get(f"/api/groups/{group.pk}/messages").json()
    assert events._checked(created)["message"] == posted["message"] == room["messages"][0]
