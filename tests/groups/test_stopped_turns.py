"""Stop keeps what was said: a reply cut short mid-stream, against a real streaming HTTP
server and a real worker, stays as its speaker's turn marked stopped, counted as the call it
was, read back by the API, and seen by that agent's next call as its own words."""

from __future__ import annotations

import pytest

from garden.models import Agent, Message
from groups.models import CallReservation, GroupRequest
from groups.services.requests import request_create, request_stop_active
from groups.services.stopped_turns import drafts_kept
from tests.conftest import wait_for
from tests.groups.helpers import on_server, openai_stream
from tests.support.driving import drive
from tests.support.providers import openai_reply
from tests.support.workers import worker_quiescent

ANSWER = " ".join(
    f"Paragraph {n}: the figures for week {n} are in and look steady." for n in range(8)
)


@pytest.fixture
def streaming_concierge(group_factory, owner, provider_server):
    group = group_factory(concierge_rules=[], members={"ledger": [{"reply": "Figures."}]})
    on_server(owner, Agent.objects.get(pk=group.coordinator_id), provider_server)
    events = openai_stream(openai_reply(ANSWER, usage=(900, 120)), pieces=8)
    provider_server.stream(*events, interval=0.4)
    return group, len(events)


def test_stop_mid_stream_keeps_the_streamed_text_as_the_speakers_stopped_turn(
    celery_worker_thread, streaming_concierge, owner, provider_server, api
):
    group, sent_whole = streaming_concierge
    request = request_create(group=group, text="How did the month go?")
    # A positive sign that the room has been shown part of the answer: the kept draft.
    shown = wait_for(
        lambda: (
            (drafts_kept([(request.pk, GroupRequest.objects.get(pk=request.pk).fence)]) or {})
            .get(request.pk, {})
            .get("text")
        ),
        timeout=20,
    )
    assert ANSWER.startswith(shown)
    request_stop_active(group=group)
    request.refresh_from_db()
    assert request.state == "stopped"

    turns = list(Message.objects.filter(request=request).order_by("seq"))
    (stopped,) = [m for m in turns if m.speaker_kind == "agent"]
    assert stopped.speaker_agent_id == group.coordinator_id
    assert stopped.stopped_at is not None and stopped.kind == "turn"
    said = stopped.content[0]["text"]
    assert said and ANSWER.startswith(said) and len(said) < len(ANSWER)
    assert turns[-1].kind == "notice" and turns[-1].seq > stopped.seq
    # Counted as the call it was: reserved, consumed, never given back.
    reservation = CallReservation.objects.get(request=request)
    assert (reservation.status, reservation.reason) == ("consumed", "stopped")
    assert request.working_reserved == 1

    # The worker hears of the stop and abandons the stream; nothing more of it is written.
    worker_quiescent()
    assert provider_server.sent < sent_whole
    assert Message.objects.filter(request=request, speaker_kind="agent").count() == 1

    # Read back (a reload) as stopped.
    listed = api.get(f"/api/groups/{group.pk}/messages")
    assert listed.status_code == 200, listed.content
    by_id = {m["id"]: m for m in listed.json()["messages"]}
    assert by_id[stopped.pk]["stopped"] is True
    assert by_id[stopped.pk]["speaker"]["handle"] == "concierge"
    assert not any(m["stopped"] for i, m in by_id.items() if i != stopped.pk)

    # The next call of that agent carries it as its own (assistant) words.
    provider_server.reply(200, openai_reply("Picking up from week three."))
    follow = request_create(group=group, text="Go on, briefly.")
    wait_for(lambda: GroupRequest.objects.get(pk=follow.pk).state == "completed", timeout=20)
    body = provider_server.last.body
    assert {"role": "assistant", "content": said} in [
        {"role": m["role"], "content": m.get("content")} for m in body["messages"]
    ], body["messages"]


@pytest.mark.django_db
def test_stop_with_nothing_shown_keeps_no_turn(group_factory, owner):
    """A request stopped before any text streamed leaves only the stop's notice."""
    group = group_factory(concierge_rules=[{"reply": "Done."}], members={"ledger": []})
    request = request_create(group=group, text="Hello.")
    drive(request, "running")
    assert request_stop_active(group=group).pk == request.pk
    assert [m.kind for m in Message.objects.filter(request=request).order_by("seq")] == [
        "turn",
        "notice",
    ]
    assert not Message.objects.filter(stopped_at__isnull=False).exists()


def _streaming(group):
    """``group``'s request at a step whose call streams: reserved, and a draft shown."""
    from groups import budget
    from groups.services.stopped_turns import draft_keep

    request = request_create(group=group, text="Hello.")
    drive(request, "running")
    request.refresh_from_db()
    assert budget.reserve_call(
        request_id=request.pk, purpose="working", agent_id=group.coordinator_id, fence=request.fence
    )
    draft_keep(
        request_id=request.pk, fence=request.fence, agent_id=group.coordinator_id, text="Half of"
    )
    return request


@pytest.mark.django_db
def test_archiving_keeps_what_was_shown_read_before_its_transaction(group_factory, owner):
    from groups.services.groups import group_archive

    group = group_factory(concierge_rules=[{"reply": "Done."}], members={"ledger": []})
    request = _streaming(group)
    group_archive(group=group)
    (kept,) = Message.objects.filter(request=request, speaker_kind="agent")
    assert kept.content[0]["text"] == "Half of" and kept.stopped_at is not None


@pytest.mark.django_db
def test_a_stop_inside_a_callers_transaction_reads_nothing_from_the_cache(group_factory, owner):
    """The cache is network I/O: a caller that holds a transaction (and its row locks) gets no
    draft read for it, and the stop keeps nothing."""
    from django.db import transaction

    group = group_factory(concierge_rules=[{"reply": "Done."}], members={"ledger": []})
    request = _streaming(group)
    with transaction.atomic():
        assert request_stop_active(group=group).pk == request.pk
    assert not Message.objects.filter(request=request, speaker_kind="agent").exists()
