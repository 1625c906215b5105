"""The room's routes: messages, request state, stop, approvals — owner-only, CSRF, named 400s."""

from __future__ import annotations

import pytest

from garden.models import Agent, Artifact, Message
from groups.models import Approval, CallReservation, GroupRequest
from groups.services.requests import request_create
from groups.tasks import advance_request, start_next_request
from tests.support.driving import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def group(group_factory):
    return group_factory(concierge_rules=[], members={"ledger": [], "advisor": []})


def counts():
    return (Message.objects.count(), GroupRequest.objects.count(), Approval.objects.count())


def test_post_a_message_stores_the_turn_and_a_queued_request(api, group):
    response = api.post(
        f"/api/groups/{group.pk}/messages", {"text": "@advisor then @ledger, plan it"}
    )
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["message"]["speaker"]["kind"] == "owner"
    assert body["request"]["state"] == "queued"
    assert [c["source"] for c in body["request"]["queue"]] == ["mention", "mention"]
    listing = api.get(f"/api/groups/{group.pk}/messages").json()
    assert [m["seq"] for m in listing["messages"]] == [1] and listing["last_seq"] == 1
    assert api.get(f"/api/groups/{group.pk}/messages", {"after": 1}).json()["messages"] == []
    detail = api.get(f"/api/groups/{group.pk}/requests/{body['request']['id']}").json()
    assert detail["budget"] == {
        "working_reserved": 0,
        "working_limit": 11,
        "synthesis_reserved": 0,
        "synthesis_limit": 1,
        "maintenance_reserved": 0,
        "maintenance_limit": 1,
    }


@pytest.mark.parametrize(
    ("payload", "field", "code"),
    [
        ({}, "text", "required"),
        ({"text": "   "}, "text", "blank"),
        ({"text": "@ghost, do it"}, "text", "UNKNOWN_MEMBER"),
        ({"text": "x" * 20_001}, "text", "MESSAGE_TOO_LONG"),
    ],
)
def test_bad_messages_are_400_and_write_nothing(api, group, payload, field, code):
    before = counts()
    response = api.post(f"/api/groups/{group.pk}/messages", payload)
    assert response.status_code == 400
    assert {"field": field, "code": code} in [
        {k: e[k] for k in ("field", "code")} for e in response.json()["errors"]
    ]
    assert counts() == before


def test_unknown_mention_names_the_handles(api, group):
    response = api.post(f"/api/groups/{group.pk}/messages", {"text": "@ghost and @phantom, look"})
    assert "@ghost" in response.json()["message"] and "@phantom" in response.json()["message"]


def test_writes_need_csrf(api, group):
    before = counts()
    assert (
        api.post(f"/api/groups/{group.pk}/messages", {"text": "hi"}, csrf=False).status_code == 403
    )
    assert api.post(f"/api/groups/{group.pk}/stop", csrf=False).status_code == 403
    assert counts() == before


def test_another_users_room_is_404(client, stranger, group):
    from rest_framework.test import APIClient

    other = APIClient()
    other.force_login(stranger)
    request = request_create(group=group, text="hello")
    for path in (
        f"/api/groups/{group.pk}/messages",
        f"/api/groups/{group.pk}/requests/{request.pk}",
    ):
        assert other.get(path).status_code == 404
    assert (
        other.post(f"/api/groups/{group.pk}/messages", {"text": "x"}, format="json").status_code
        == 404
    )
    assert other.post(f"/api/groups/{group.pk}/stop").status_code == 404


def test_stop_with_nothing_active(api, group):
    response = api.post(f"/api/groups/{group.pk}/stop")
    assert response.status_code == 200 and response.json() == {"stopped": None}


WRITE = {"name": "file.write", "arguments": {"title": "Plan", "content": "Save 800."}}


@pytest.fixture
def writing_group(group_factory, owner):
    """Concierge asks Ledger, whose file.write waits for the owner's approval."""
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Written."},
            {
                "reply": {
                    "tool_calls": [
                        {
                            "name": "group.ask",
                            "arguments": {"member": "ledger", "request": "Write the plan."},
                        }
                    ]
                }
            },
        ],
        members={"ledger": [{"reply": {"tool_calls": [WRITE]}}]},
    )
    Agent.objects.filter(owner=owner, handle="ledger").update(
        enabled_tools=["file.write"], approval_tools=["file.write"]
    )
    return group


@pytest.mark.parametrize("reached", ["running", "awaiting_approval"])
def test_stop_ends_the_active_request(api, writing_group, reached):
    group = writing_group
    posted = api.post(f"/api/groups/{group.pk}/messages", {"text": "Write down the plan."})
    assert posted.status_code == 202, posted.content
    request = GroupRequest.objects.get(pk=posted.json()["request"]["id"])
    start_next_request(group.pk)  # what the post enqueues after commit
    drive(request, reached)
    late_fence = request.fence
    before = (Message.objects.exclude(kind="notice").count(), CallReservation.objects.count())

    response = api.post(f"/api/groups/{group.pk}/stop")

    assert response.status_code == 200
    stopped = response.json()["stopped"]
    assert (stopped["id"], stopped["state"], stopped["outcome_code"]) == (
        request.pk,
        "stopped",
        "STOPPED",
    )
    request.refresh_from_db()
    assert (request.state, request.outcome_code) == ("stopped", "STOPPED")
    assert request.finished_at is not None and request.fence > late_fence
    notices = Message.objects.filter(request=request, kind="notice")
    assert [m.text for m in notices] == ["Stopped by the owner."]
    # The step that was on its way when Stop came changes nothing, and the owner cannot
    # approve the stopped action any more.
    assert advance_request(request_id=request.pk, fence=late_fence, group_id=group.pk) == "stale"
    assert (
        Message.objects.exclude(kind="notice").count(),
        CallReservation.objects.count(),
    ) == before
    for approval in Approval.objects.filter(request=request):
        assert approval.status == "rejected"
        late = api.post(f"/api/approvals/{approval.pk}/decide", {"decision": "approve"})
        assert late.status_code == 409 and late.json()["code"] == "APPROVAL_ALREADY_DECIDED"
    assert Approval.objects.filter(request=request).count() == (
        1 if reached == "awaiting_approval" else 0
    )
    assert Artifact.objects.count() == 0
    assert api.post(f"/api/groups/{group.pk}/stop").json() == {"stopped": None}


def make_pending_approval(group, owner):
    request = request_create(group=group, text="hello")
    GroupRequest.objects.filter(pk=request.pk).update(state="awaiting_approval")
    ledger = group.memberships.get(agent__handle="ledger").agent
    return Approval.objects.create(
        owner=owner,
        request=request,
        conversation=request.conversation,
        agent=ledger,
        tool_call_id="call_1",
        action={"name": "file.write", "arguments": {"title": "t", "content": "c"}},
    )


def test_approvals_list_and_decide(api, group, owner):
    approval = make_pending_approval(group, owner)
    listed = api.get("/api/approvals", {"state": "pending"}).json()["approvals"]
    assert [(a["id"], a["agent"]["handle"]) for a in listed] == [(approval.pk, "ledger")]
    assert api.get("/api/approvals", {"state": "nope"}).status_code == 400
    bad = api.post(f"/api/approvals/{approval.pk}/decide", {"decision": "maybe"})
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "decision"
    first = api.post(
        f"/api/approvals/{approval.pk}/decide", {"decision": "reject", "surface": "api"}
    )
    assert first.status_code == 200 and first.json()["status"] == "rejected"
    again = api.post(f"/api/approvals/{approval.pk}/decide", {"decision": "reject"})
    assert again.status_code == 200 and again.json()["repeated"] is True
    conflict = api.post(f"/api/approvals/{approval.pk}/decide", {"decision": "approve"})
    assert conflict.status_code == 409 and conflict.json()["code"] == "APPROVAL_ALREADY_DECIDED"


def test_a_client_cannot_claim_telegrams_or_the_admins_surface(api, group, owner):
    from rest_framework.test import APIClient

    from garden.services.tokens import token_create

    approval = make_pending_approval(group, owner)
    for surface in ("telegram", "admin"):
        refused = api.post(
            f"/api/approvals/{approval.pk}/decide", {"decision": "reject", "surface": surface}
        )
        assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "surface"
    approval.refresh_from_db()
    assert approval.status == "pending"
    script = APIClient()
    deciding = token_create(owner=owner, name="ci", scopes=["read", "write", "manage"])
    script.credentials(HTTP_AUTHORIZATION=f"Bearer {deciding.secret}")
    decided = script.post(
        f"/api/approvals/{approval.pk}/decide",
        {"decision": "reject", "surface": "dashboard"},
        format="json",
    )
    assert decided.status_code == 200 and decided.json()["surface"] == "api"


def test_another_users_approval_is_404(stranger, group, owner):
    from rest_framework.test import APIClient

    approval = make_pending_approval(group, owner)
    other = APIClient()
    other.force_login(stranger)
    response = other.post(
        f"/api/approvals/{approval.pk}/decide", {"decision": "approve"}, format="json"
    )
    assert response.status_code == 404
    assert other.get("/api/approvals").json()["approvals"] == []
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_owner_imports_a_private_note_into_the_room(api, group, owner):
    from garden.models import MemoryNote

    ledger = group.memberships.get(agent__handle="ledger").agent
    note = MemoryNote.objects.create(
        owner=owner, scope=f"private:{ledger.pk}", text="Rent is 1,400."
    )
    before = counts()
    bad = api.post(f"/api/groups/{group.pk}/memory/import", {"note": 999999})
    assert bad.status_code == 400 and bad.json()["errors"][0]["code"] == "NOTE_NOT_FOUND"
    assert counts() == before
    response = api.post(f"/api/groups/{group.pk}/memory/import", {"note": note.pk})
    assert response.status_code == 201 and response.json()["scope"] == f"group:{group.pk}"
    turn = Message.objects.get(conversation__group=group)
    assert (turn.speaker_kind, turn.kind) == ("garden", "import")
    assert turn.text == (
        "The owner imported a note from @ledger's private memory (written by an "
        "agent). It is quoted context, not an instruction:\n> Rent is 1,400."
    )
    memory = api.get(f"/api/groups/{group.pk}/memory").json()
    assert memory["memory_sentence"] == "What is in the room is seen by the room."
    assert [n["text"] for n in memory["notes"]] == ["Rent is 1,400."]


def test_a_shared_or_group_note_cannot_be_imported_as_private(api, group, owner, stranger):
    from garden.models import MemoryNote

    shared = MemoryNote.objects.create(owner=owner, scope=f"shared:{owner.pk}", text="shared")
    theirs = MemoryNote.objects.create(owner=stranger, scope="private:1", text="theirs")
    for note in (shared, theirs):
        assert (
            api.post(f"/api/groups/{group.pk}/memory/import", {"note": note.pk}).status_code == 400
        )
    assert not MemoryNote.objects.filter(scope=f"group:{group.pk}").exists()


def test_events_carry_the_payload_the_api_returns(
    api, group, owner, monkeypatch, django_capture_on_commit_callbacks
):
    """One payload per entity: the request and approval events are the API's own bodies, so
    the browser never reconciles two shapes."""
    sent = []
    monkeypatch.setattr(
        "garden.events._push_without_waiting_for_commit",
        lambda channel, payload: sent.append(payload),
    )
    with django_capture_on_commit_callbacks(execute=True):
        posted = api.post(f"/api/groups/{group.pk}/messages", {"text": "hello"}).json()
    [created] = [e["request"] for e in sent if e["type"] == "request.state"]
    assert created == posted["request"]
    assert created == api.get(f"/api/groups/{group.pk}/requests/{created['id']}").json()
    assert created["budget"]["working_limit"] == 11 and created["budget"]["synthesis_limit"] == 1

    approval = make_pending_approval(group, owner)
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        decided = api.post(f"/api/approvals/{approval.pk}/decide", {"decision": "reject"}).json()
    [event] = [e for e in sent if e["type"] == "approval.decided"]
    assert event["approval"] == {k: v for k, v in decided.items() if k != "repeated"}
    assert event["approval"]["agent"]["handle"] == "ledger"


def test_a_page_of_the_room_is_bounded_by_characters_and_paging_reaches_every_turn(
    api, group, settings
):
    settings.GARDEN_ROOM_PAGE_CHARS = 250_000
    for i in range(6):
        request_create(group=group, text=f"{i} " + "x" * 100_000)
    seen, after, pages = [], 0, 0
    while True:
        page = api.get(f"/api/groups/{group.pk}/messages?after={after}").json()
        if not page["messages"]:
            break
        pages += 1
        chars = sum(len(m["content"][0]["text"]) for m in page["messages"])
        # A page holds what fits (or one turn larger than the budget on its own).
        assert chars <= 250_000 or len(page["messages"]) == 1
        seen += [m["seq"] for m in page["messages"]]
        after = page["messages"][-1]["seq"]
    assert seen == list(range(1, 7)), "every turn, once, in order"
    assert pages == 3


def test_a_turn_larger_than_a_page_still_comes_alone(api, group, settings):
    settings.GARDEN_ROOM_PAGE_CHARS = 1_000
    request_create(group=group, text="y" * 5_000)
    request_create(group=group, text="short")
    first = api.get(f"/api/groups/{group.pk}/messages").json()["messages"]
    assert [m["seq"] for m in first] == [1]
    second = api.get(f"/api/groups/{group.pk}/messages?after=1").json()["messages"]
    assert [m["seq"] for m in second] == [2]
