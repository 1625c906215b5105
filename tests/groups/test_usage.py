"""Watching a step think: token usage from the provider's usage fields summed on the request,
the speaker announced as its call goes out, the reply's draft pushed to the room while it is
generated, and a step stopped mid-stream leaving neither a half turn nor its tokens."""

from __future__ import annotations

from typing import Any

import pytest

from garden.models import Message
from groups.models import GroupRequest
from groups.payloads import request_payload
from groups.services.requests import request_create, request_start_next, request_stop_active
from tests.conftest import _wait_until_worker_idle, wait_for
from tests.groups.helpers import on_server, openai_stream
from tests.support.driving import drive
from tests.support.providers import openai_reply

ASK = ("call-1", "group.ask", {"member": "ledger", "request": "Sum the rent."})
ANSWER = "The rent comes to 1,400 a month, paid on the first of each month."


def test_each_calls_usage_is_summed_on_the_request(group_factory, owner, provider_server, api):
    group = group_factory(concierge_rules=[], members={"ledger": [{"reply": "1,400."}]})
    on_server(owner, group.coordinator, provider_server)
    # One call streamed, one answered whole (a server that ignores ``stream``): both count.
    provider_server.stream(*openai_stream(openai_reply("Asking.", [ASK], usage=(120, 15))))
    provider_server.reply(200, openai_reply(ANSWER, usage=(180, 40)))
    request = request_create(group=group, text="What is the rent?")
    request_start_next(group_id=group.pk)

    drive(request)

    assert request.state == "completed", request.outcome
    # Ledger's scripted model reports no usage and adds nothing.
    assert (request.input_tokens, request.output_tokens) == (300, 55)
    # The server's model ("m") has no price: its two calls are unpriced, the scripted one free.
    usage = {"input_tokens": 300, "output_tokens": 55, "cost": "0.000000000", "unpriced_calls": 2}
    assert request_payload(request)["usage"] == usage
    assert request_payload(request)["working"] is None
    answer = api.get(f"/api/groups/{group.pk}/requests/{request.pk}").json()
    assert answer["usage"] == usage
    assert all(body["stream"] is True for body in (r.body for r in provider_server.requests))


@pytest.mark.django_db(transaction=True)  # events after each commit, in the order they happen
def test_the_room_sees_the_speaker_then_the_draft_then_the_turn(
    group_factory, owner, provider_server, captured_events
):
    group = group_factory(concierge_rules=[], members={})
    on_server(owner, group.coordinator, provider_server)
    provider_server.stream(*openai_stream(openai_reply(ANSWER), pieces=5), interval=0.25)

    request = request_create(group=group, text="What is the rent?")
    drive(request)
    seen: list[dict[str, Any]] = [
        event
        for channel, pushed in captured_events
        if channel == f"group-{group.pk}"
        for event in (pushed["events"] if pushed["type"] == "batch" else [pushed])
    ]
    assert any(e["type"] == "request.state" and e["request"]["state"] == "completed" for e in seen)

    kinds = [e["type"] for e in seen]
    started = next(
        e for e in seen if e["type"] == "request.state" and e["request"]["working"] is not None
    )
    working = started["request"]["working"]
    assert working["agent"]["handle"] == "concierge" and working["since"]
    drafts = [e for e in seen if e["type"] == "request.draft"]
    assert drafts, kinds
    step = working["step"]
    shown = ""
    for draft in drafts:
        assert draft["request"] == request.pk and draft["step"] == step
        assert draft["agent"] == working["agent"]
        # Each draft carries only what is new, after what the ones before it carried.
        assert draft["offset"] == len(shown) and draft["text"]
        shown += draft["text"]
    assert ANSWER.startswith(shown)
    # The speaker first, the drafts next, the stored turn last.
    turn = next(
        i
        for i, e in enumerate(seen)
        if e["type"] == "message.created" and e["message"]["speaker"]["kind"] == "agent"
    )
    assert seen.index(started) < kinds.index("request.draft") < turn
    assert seen[turn]["message"]["content"] == [{"type": "text", "text": ANSWER}]
    assert seen[-1]["request"]["working"] is None


def test_a_step_stopped_mid_stream_keeps_only_what_was_shown_and_no_tokens_it_never_got(
    celery_worker_thread, group_factory, owner, provider_server
):
    from groups.services.stopped_turns import drafts_kept

    group = group_factory(concierge_rules=[], members={})
    on_server(owner, group.coordinator, provider_server)
    events = openai_stream(openai_reply(ANSWER, usage=(90, 30)), pieces=6)
    provider_server.stream(*events, interval=0.3)
    request = request_create(group=group, text="What is the rent?")
    # Mid-stream: the room has been shown part of the answer.
    wait_for(
        lambda: drafts_kept([(request.pk, GroupRequest.objects.get(pk=request.pk).fence)]),
        timeout=10,
    )

    stopped = request_stop_active(group=group)

    assert stopped is not None and stopped.pk == request.pk
    _wait_until_worker_idle()
    assert provider_server.sent < len(events)  # the stream was abandoned, not read to its end
    request.refresh_from_db()
    assert request.state == "stopped"
    (kept,) = Message.objects.filter(request=request, speaker_kind="agent")
    assert kept.stopped_at is not None and ANSWER.startswith(kept.content[0]["text"])
    # The usage comes at the stream's end, which never came: nothing is made up.
    assert (request.input_tokens, request.output_tokens) == (0, 0)
    assert request_payload(request)["working"] is None


@pytest.mark.parametrize("state", ["completed", "stopped"])
def test_working_is_only_the_call_out_now(group_factory, owner, state):
    group = group_factory(concierge_rules=[], members={})
    request = request_create(group=group, text="hello")
    request_start_next(group_id=group.pk)
    request.refresh_from_db()
    request.working_agent, request.working_fence = group.coordinator, request.fence + 1
    request.fence += 1
    assert request.working_now
    request.completed_fence = request.fence
    assert not request.working_now  # its step completed
    request.completed_fence -= 1
    request.state = state
    assert not request.working_now  # the request ended
