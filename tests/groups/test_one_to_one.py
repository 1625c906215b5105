"""A person talks to one agent: each message in a 1:1 conversation is a request of the agent's
own room, run by the group loop through a real worker — tools, approvals (API and Telegram),
Stop, the twelve-call ceiling reserved before each call, bounding, drafts on the room's
socket — with the same API shape as a group's room."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.utils import timezone

from config.routing import websocket_urlpatterns
from garden.models import Agent, Artifact, Conversation, Message, ModelAccount
from garden.services.accounts import model_account_create
from garden.services.agents import agent_create
from garden.services.conversations import conversation_create, message_append, text_block
from groups.models import Approval, CallReservation, Group, GroupRequest
from groups.services.request_sweep import request_sweep
from groups.services.requests import conversation_request_create
from groups.tasks import advance_request
from tests.conftest import wait_for
from tests.groups.conftest import scripted
from tests.groups.helpers import (
    answer_of,
    drive,
    one_to_one,
)
from tests.groups.helpers import writer as make_writer
from tests.support.providers import openai_reply


def agent(owner, handle="ledger", rules=(), default="ok", tools=(), approvals=(), **options):
    return agent_create(
        owner=owner,
        handle=handle,
        name=handle.title(),
        model_account=scripted(owner, handle, list(rules), default, **options),
        enabled_tools=list(tools),
        approval_tools=list(approvals),
    )


def http_agent(owner, server, tools=(), approvals=()):
    """Ledger on an OpenAI-compatible account at the local ``server``."""
    account = model_account_create(
        owner=owner,
        name="local",
        provider="openai",
        model="m",
        base_url=f"{server.url}/v1",
        timeout_seconds=5,
    )
    return agent_create(
        owner=owner,
        handle="ledger",
        name="Ledger",
        model_account=account,
        enabled_tools=list(tools),
        approval_tools=list(approvals),
    )


def transcript(conversation):
    return [
        (m.speaker_kind, m.speaker_agent.handle if m.speaker_agent_id else None, m.kind, m.text)
        for m in conversation.messages.select_related("speaker_agent").order_by("seq")
    ]


def state_of(request) -> str:
    request.refresh_from_db()
    return request.state


@pytest.fixture
def writer(owner):
    """Ledger, whose file.write waits for the owner's approval."""
    return make_writer(owner)


# --- the API --------------------------------------------------------------------------------


def test_a_message_is_a_request_answered_through_a_real_worker(celery_worker_thread, api, owner):
    ledger = agent(owner, rules=[{"when": "spend", "reply": "Spending was 3,150."}])
    conversation = conversation_create(owner=owner, agent=ledger)
    posted = api.post(
        f"/api/conversations/{conversation.pk}/messages", {"text": "How was spending?"}
    )
    assert posted.status_code == 202, posted.content
    body = posted.json()
    assert body["message"]["speaker"]["kind"] == "owner"
    assert body["request"]["conversation"] == conversation.pk
    rid = body["request"]["id"]
    url = f"/api/conversations/{conversation.pk}/requests/{rid}"
    wait_for(lambda: api.get(url).json()["state"] == "completed", timeout=30)
    read = api.get(url).json()
    assert read["outcome_code"] == "CONCLUDED" and read["outcome"] == "Spending was 3,150."
    # One call, no coordinator and no synthesis: the agent's reply is the answer.
    assert (read["budget"]["working_reserved"], read["budget"]["synthesis_reserved"]) == (1, 0)
    assert transcript(conversation) == [
        ("owner", None, "turn", "How was spending?"),
        ("agent", "ledger", "turn", "Spending was 3,150."),
    ]
    page = api.get(f"/api/conversations/{conversation.pk}/messages").json()
    assert page["conversation"] == conversation.pk and page["last_seq"] == 2
    assert [m["speaker"]["kind"] for m in page["messages"]] == ["owner", "agent"]
    assert page["active_request"] is None and page["queued_requests"] == 0


@pytest.mark.django_db
def test_the_agents_room_is_not_a_group(api, owner):
    ledger = agent(owner)
    conversation = conversation_create(owner=owner, agent=ledger)
    request = one_to_one(owner, ledger)
    room = request.group
    assert room.kind == Group.Kind.SOLO and room.coordinator_id == ledger.pk
    assert not room.memberships.exists()
    # The same agent's conversations share one room; it is no group of the owner's.
    assert one_to_one(owner, ledger).group_id == room.pk
    assert [g["id"] for g in api.get("/api/groups").json()] == []
    assert api.get(f"/api/groups/{room.pk}").status_code == 404
    assert api.post(f"/api/groups/{room.pk}/messages", {"text": "hi"}).status_code == 404
    assert (
        api.post(f"/api/conversations/{conversation.pk}/messages", {"text": "hi"}).status_code
        == 202
    )


@pytest.mark.django_db
def test_another_owners_conversation_and_a_groups_thread_are_not_found(
    api, owner, stranger, group_factory
):
    theirs = conversation_create(owner=stranger, agent=agent(stranger))
    group = group_factory(concierge_rules=[], members={"ledger": []})
    thread = conversation_create(owner=owner, group=group)
    for conversation in (theirs, thread):
        base = f"/api/conversations/{conversation.pk}"
        assert api.post(f"{base}/messages", {"text": "hi"}).status_code == 404
        assert api.get(f"{base}/messages").status_code == 404
        assert api.post(f"{base}/stop").status_code == 404
    assert Message.objects.count() == 0 and GroupRequest.objects.count() == 0


@pytest.mark.django_db
def test_bad_messages_are_refused_by_name_and_write_nothing(api, owner, settings):
    ledger = agent(owner)
    conversation = conversation_create(owner=owner, agent=ledger)
    url = f"/api/conversations/{conversation.pk}/messages"
    blank = api.post(url, {"text": "   "})
    assert blank.status_code == 400 and blank.json()["errors"][0]["code"] == "blank"
    settings.GARDEN_MAX_QUEUED_PER_GROUP = 1
    assert api.post(url, {"text": "one"}).status_code == 202
    full = api.post(url, {"text": "two"})
    assert full.status_code == 429 and full.json()["code"] == "QUEUE_FULL"
    assert "This agent already has 1" in full.json()["message"]
    Agent.objects.filter(pk=ledger.pk).update(removed_at=timezone.now())
    settings.GARDEN_MAX_QUEUED_PER_GROUP = 5
    removed = api.post(url, {"text": "three"})
    assert removed.json()["code"] == "AGENT_CANNOT_RUN", removed.content
    Conversation.objects.filter(pk=conversation.pk).update(status="closed")
    assert api.post(url, {"text": "four"}).json()["code"] == "CONVERSATION_CLOSED"
    assert conversation.messages.count() == 1 and GroupRequest.objects.count() == 1


@pytest.mark.django_db
def test_an_agent_that_lost_its_model_ends_the_request_honestly(owner):
    ledger = agent(owner)
    request = one_to_one(owner, ledger)
    Agent.objects.filter(pk=ledger.pk).update(model_account=None)
    drive(request)
    assert (request.state, request.outcome_code) == ("failed", "AGENT_CANNOT_RUN")
    assert "cannot run now" in answer_of(request).text
    assert CallReservation.objects.filter(request=request).count() == 0


@pytest.mark.django_db
def test_messages_queue_behind_the_running_one_in_order(owner):
    ledger = agent(owner, default="Answered.")
    first = one_to_one(owner, ledger, "one")
    second = one_to_one(owner, ledger, "two")
    drive(first, "running")
    assert state_of(second) == "queued"
    drive(first)
    drive(second)
    assert [first.state, second.state] == ["completed", "completed"]


# --- tools and approvals --------------------------------------------------------------------


@pytest.mark.django_db
def test_a_tool_call_runs_and_its_result_is_paired_with_its_call(owner):
    ledger = agent(
        owner,
        rules=[
            {"after_tool_result": True, "reply": "Remembered."},
            {
                "when": "remember",
                "reply": {
                    "tool_calls": [{"name": "memory.remember", "arguments": {"text": "Rent 1,400"}}]
                },
            },
        ],
        tools=["memory.remember"],
    )
    request = one_to_one(owner, ledger, "Please remember the rent.")
    drive(request)
    assert (request.state, answer_of(request).text) == ("completed", "Remembered.")
    turns = list(Message.objects.filter(request=request, kind="turn").order_by("seq"))
    call = next(b for m in turns for b in m.content if b["type"] == "tool_call")
    result = next(b for m in turns for b in m.content if b["type"] == "tool_result")
    assert result["call_id"] == call["id"] and not result["is_error"]
    assert "private memory" in result["content"]
    # Outside a group, the agent's own memory: its private scope.
    from garden.models import MemoryNote

    assert MemoryNote.objects.get().scope == f"private:{ledger.pk}"


def test_an_approval_suspends_the_request_and_the_action_runs_exactly_once(
    celery_worker_thread, api, owner, writer
):
    conversation = conversation_create(owner=owner, agent=writer)
    posted = api.post(f"/api/conversations/{conversation.pk}/messages", {"text": "Write the plan."})
    request = GroupRequest.objects.get(pk=posted.json()["request"]["id"])
    wait_for(lambda: state_of(request) == "awaiting_approval", timeout=30)
    listed = api.get("/api/approvals", {"state": "pending"}).json()["approvals"]
    assert [(a["conversation"], a["action"]["name"]) for a in listed] == [
        (conversation.pk, "file.write")
    ]
    assert listed[0]["label"] == "Ledger wants to write Plan"
    decided = api.post(f"/api/approvals/{listed[0]['id']}/decide", {"decision": "approve"})
    assert decided.status_code == 200, decided.content
    wait_for(lambda: state_of(request) == "completed", timeout=30)
    assert answer_of(request).text == "Written."
    again = api.post(f"/api/approvals/{listed[0]['id']}/decide", {"decision": "approve"})
    assert again.json()["repeated"] is True
    assert Artifact.objects.filter(title="Plan").count() == 1


def test_stop_while_an_approval_waits_rejects_it_and_nothing_late_restarts_it(
    celery_worker_thread, api, owner, writer
):
    conversation = conversation_create(owner=owner, agent=writer)
    posted = api.post(f"/api/conversations/{conversation.pk}/messages", {"text": "Write the plan."})
    request = GroupRequest.objects.get(pk=posted.json()["request"]["id"])
    wait_for(lambda: state_of(request) == "awaiting_approval", timeout=30)
    late_fence = request.fence
    approval = Approval.objects.get(request=request)
    stopped = api.post(f"/api/conversations/{conversation.pk}/stop")
    assert stopped.status_code == 200 and stopped.json()["stopped"]["state"] == "stopped"
    approval.refresh_from_db()
    assert approval.status == "rejected"
    late = api.post(f"/api/approvals/{approval.pk}/decide", {"decision": "approve"})
    assert late.status_code == 409, late.content
    assert advance_request(request_id=request.pk, fence=late_fence, group_id=request.group_id) == (
        "stale"
    )
    assert state_of(request) == "stopped" and not Artifact.objects.filter(title="Plan").exists()
    assert api.post(f"/api/conversations/{conversation.pk}/stop").json() == {"stopped": None}


# --- the ceiling and the bounding -----------------------------------------------------------


@pytest.mark.django_db
def test_twelve_calls_at_most_each_reserved_before_it_is_sent(owner, provider_server):
    """A model that calls a tool every time: eleven working calls, then the one reserved
    answer without tools; the provider sees twelve requests and no more."""
    for i in range(11):
        provider_server.reply(
            200, openai_reply(None, [(f"c{i}", "memory.recall", {"query": "rent"})])
        )
    provider_server.reply(200, openai_reply("Here is what I have."))
    ledger = http_agent(owner, provider_server, tools=["memory.recall"])
    request = one_to_one(owner, ledger, "Keep looking.")
    drive(request)
    assert (request.state, request.working_reserved, request.synthesis_reserved) == (
        "completed",
        11,
        1,
    )
    assert len(provider_server.requests) == 12
    last = provider_server.requests[-1].body
    assert "tools" not in last and "no tools are available" in str(last["messages"][-1])
    reservations = list(CallReservation.objects.filter(request=request).order_by("id"))
    assert [r.status for r in reservations] == ["consumed"] * 12
    assert [r.purpose for r in reservations][-1] == "synthesis"


@pytest.mark.django_db
def test_a_long_conversation_is_bounded_before_every_call(owner, provider_server, settings):
    """2,000 earlier turns of 1,000 characters: the model gets the newest that fit the cap and
    the question itself — never the whole thread."""
    from garden.services.conversations import messages_append

    settings.GARDEN_CHAT_CAP_CHARS = 20_000
    provider_server.reply(200, openai_reply("Bounded."))
    ledger = http_agent(owner, provider_server)
    conversation = conversation_create(owner=owner, agent=ledger)
    history = [
        Message(
            conversation=conversation,
            speaker_kind="owner" if i % 2 == 0 else "agent",
            speaker_agent=None if i % 2 == 0 else ledger,
            content=[{"type": "text", "text": f"turn {i} " + "x" * 990}],
        )
        for i in range(2_000)
    ]
    messages_append(conversation_id=conversation.pk, messages=history)
    from groups.services.requests import conversation_request_create

    request = conversation_request_create(
        owner=owner, conversation=conversation, text="And the total?"
    )
    drive(request)
    assert answer_of(request).text == "Bounded."
    sent = provider_server.requests[0].body
    size = len(sent.get("system", "")) + sum(len(str(m["content"])) for m in sent["messages"])
    assert size <= 20_000 + 2_000, size
    assert sent["messages"][-1] == {"role": "user", "content": "And the total?"}
    assert "turn 1999 " in str(sent) and "turn 0 " not in str(sent)


# --- drafts on the room's socket ------------------------------------------------------------


# The worker's pushes and this test's socket run on two event loops: the in-memory channel
# layer does not carry a message between loops, Redis's does.
@pytest.mark.redis
def test_a_reply_streams_drafts_to_the_conversations_socket(celery_worker_thread, owner):
    ledger = agent(owner, default="The figures are in: spending was 3,150 this month.", delay=0.6)
    conversation = conversation_create(owner=owner, agent=ledger)
    other = conversation_create(owner=owner, agent=ledger)

    async def collect():
        communicator = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation.pk}/"
        )
        communicator.scope["user"] = owner
        connected, _ = await communicator.connect()
        assert connected
        # Another conversation of the same agent first: nothing of it reaches this socket.
        await sync_to_async(conversation_request_create)(
            owner=owner, conversation=other, text="elsewhere"
        )
        await sync_to_async(conversation_request_create)(
            owner=owner, conversation=conversation, text="How was spending?"
        )
        seen = []
        while True:
            event = await communicator.receive_json_from(timeout=30)
            events = event["events"] if event["type"] == "batch" else [event]
            seen += events
            if any(
                e["type"] == "request.state" and e["request"]["state"] == "completed"
                for e in events
            ):
                break
        await communicator.disconnect()
        return seen

    seen = async_to_sync(collect)()
    drafts = [e for e in seen if e["type"] == "request.draft"]
    assert drafts and drafts[0]["agent"]["handle"] == "ledger"
    assert "".join(d["text"] for d in drafts).startswith("The figures are in")
    assert all(
        e["message"]["conversation"] == conversation.pk
        for e in seen
        if e["type"] == "message.created"
    )
    assert all(
        e["request"]["conversation"] == conversation.pk
        for e in seen
        if e["type"] == "request.state"
    )


@pytest.mark.django_db(transaction=True)
def test_a_stranger_cannot_open_the_conversations_socket(owner, stranger):
    conversation = conversation_create(owner=owner, agent=agent(owner))

    async def run():
        communicator = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation.pk}/"
        )
        communicator.scope["user"] = stranger
        await communicator.connect()
        output = await communicator.receive_output(timeout=2)
        await communicator.disconnect()
        return output

    assert async_to_sync(run)() == {"type": "websocket.close", "code": 4403}


# --- turns from before ----------------------------------------------------------------------


@pytest.mark.django_db
def test_an_unanswered_turn_from_before_is_answered_by_the_sweeper(owner):
    ledger = agent(owner, default="Late but answered.")
    conversation = conversation_create(owner=owner, agent=ledger)
    asked = message_append(
        conversation_id=conversation.pk, speaker_kind="owner", content=[text_block("hi")]
    )
    answered_before = message_append(
        conversation_id=conversation.pk, speaker_kind="owner", content=[text_block("old")]
    )
    message_append(
        conversation_id=conversation.pk,
        speaker_kind="agent",
        speaker_agent=ledger,
        content=[text_block("old answer")],
        in_reply_to=answered_before,
    )
    Message.objects.filter(pk__in=[asked.pk, answered_before.pk]).update(
        created_at=timezone.now() - timedelta(hours=1)
    )
    assert request_sweep(older_than_seconds=60)["answered"] == 1
    assert request_sweep(older_than_seconds=60)["answered"] == 0
    request = GroupRequest.objects.get(message=asked)
    drive(request)
    assert answer_of(request).text == "Late but answered."
    # The turns from before read as they did, in the projection too.
    assert [t[3] for t in transcript(conversation)] == [
        "hi",
        "old",
        "old answer",
        "Late but answered.",
    ]
    assert ModelAccount.objects.filter(owner=owner).exists()


@pytest.mark.django_db
def test_a_members_own_conversation_and_its_group_never_see_each_other(
    group_factory, owner, provider_server
):
    """Members may use the group's messages, but their individual conversations remain
    separate: what the owner told Ledger alone never reaches Ledger's call in the group, and
    what was said in the group never reaches Ledger's own room."""
    from groups.services.requests import request_create
    from tests.groups.helpers import on_server
    from tests.support.driving import drive

    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Concluded."},
            {
                "reply": {
                    "tool_calls": [
                        {"name": "group.ask", "arguments": {"member": "ledger", "request": "Sum."}}
                    ]
                }
            },
        ],
        members={"ledger": []},
    )
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    on_server(owner, ledger, provider_server)
    for text in ("Noted, privately.", "Group figure.", "Private again."):
        provider_server.reply(200, openai_reply(text))
    alone = conversation_create(owner=owner, agent=ledger)
    first = conversation_request_create(
        owner=owner, conversation=alone, text="PRIVATE-SALARY is 9000."
    )
    drive(first)
    in_group = request_create(group=group, text="GROUP-ONLY-TASK: add the bills.")
    drive(in_group)
    assert in_group.state == "completed"
    again = conversation_request_create(owner=owner, conversation=alone, text="And now?")
    drive(again)
    private_call, group_call, private_again = (str(r.body) for r in provider_server.requests)
    assert "PRIVATE-SALARY" in private_call
    assert "PRIVATE-SALARY" not in group_call and "Noted, privately." not in group_call
    assert "GROUP-ONLY-TASK" in group_call
    assert "GROUP-ONLY-TASK" not in private_again and "Group figure." not in private_again
    assert "PRIVATE-SALARY" in private_again and "Noted, privately." in private_again
