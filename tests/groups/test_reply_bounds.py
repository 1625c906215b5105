"""A reply bounded by what the step asked for, with a real local HTTP server as one owner's
model server: a flood is cut and named (REPLY_TOO_LARGE, the call kept), the room's socket
carries a bounded amount of it, another owner's request completes meanwhile, and a reply whose
JSON cannot be read ends the request once, with nothing for the sweeper to call again."""

from __future__ import annotations

import json
from typing import Any

import pytest

from garden.models import Artifact, Message
from garden.providers._http import reply_limit
from garden.providers.types import ChatRequest
from groups.models import CallReservation, GroupRequest
from groups.services.approvals import sweep_stranded
from groups.services.requests import request_create
from tests.conftest import _wait_until_worker_idle, wait_for
from tests.groups.conftest import make_group
from tests.groups.helpers import listen, next_events, on_server
from tests.support.driving import drive
from tests.support.providers import openai_reply

PIECE = "x" * 1_000
SIX_MB = 6_000  # pieces of PIECE
STEP_LIMIT = reply_limit(ChatRequest(system="", messages=()).max_tokens)


def flood(pieces: int = SIX_MB) -> list[Any]:
    """A chat-completions stream of ``pieces`` thousand-character deltas: 6 MB by default."""
    chunk = {"choices": [{"index": 0, "delta": {"content": PIECE}, "finish_reason": None}]}
    return [chunk] * pieces + ["data: [DONE]\n\n"]


def nested_body(depth: int = 200_000) -> bytes:
    return ('{"choices": ' + "[" * depth + "]" * depth + "}").encode()


def ended(request: GroupRequest) -> bool:
    request.refresh_from_db()
    return request.is_finished


def test_a_six_megabyte_reply_ends_bounded_and_named_while_another_owner_is_served(
    celery_worker_thread, group_factory, owner, stranger, provider_server
):
    group = group_factory(concierge_rules=[], members={})
    on_server(owner, group.coordinator, provider_server)
    provider_server.stream(*flood())
    others = make_group(stranger, concierge_rules=[], members={}, concierge_default="Done.")
    layer, channel = listen(group.pk)

    request = request_create(group=group, text="Write me everything.")
    other = request_create(group=others, text="A short answer, please.")
    pushed: list[dict[str, Any]] = []
    while not any(
        e["type"] == "request.state" and e["request"]["state"] == "failed" for e in pushed
    ):
        pushed += next_events(layer, channel)

    request.refresh_from_db()
    assert request.state == "failed"
    assert request.outcome_code == "REPLY_TOO_LARGE"
    # The model ran: its call is counted, and it was not asked again.
    [reservation] = CallReservation.objects.filter(request=request)
    assert (reservation.status, reservation.reason) == ("consumed", "REPLY_TOO_LARGE")
    assert len(provider_server.requests) == 1
    assert not Message.objects.filter(request=request, speaker_kind="agent").exists()
    notice = Message.objects.get(request=request, kind="notice")
    assert "REPLY_TOO_LARGE" in notice.content[0]["text"]
    # What the room's socket carried for it stays within a small multiple of the call's cap
    # (the whole text again with every draft was hundreds of megabytes).
    drafts = [e for e in pushed if e["type"] == "request.draft"]
    assert sum(len(d["text"]) for d in drafts) <= STEP_LIMIT
    assert sum(len(json.dumps(e)) for e in pushed) < 3 * STEP_LIMIT
    # The server's writes failed once the connection was closed, long before 6 MB were out.
    wait_for(lambda: provider_server.streams_ended == 1)
    assert provider_server.sent < SIX_MB // 2
    # The other owner's request was served as if the flood were not there.
    wait_for(lambda: ended(other))
    assert other.state == "completed", other.outcome


@pytest.mark.django_db
def test_a_members_flood_ends_its_contribution_by_name_and_the_request_goes_on(
    group_factory, owner, provider_server
):
    ask = {"name": "group.ask", "arguments": {"member": "ledger", "request": "All figures."}}
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Concluded without the figures."},
            {"reply": {"tool_calls": [ask]}},
        ],
        members={"ledger": []},
    )
    ledger = group.memberships.get(agent__handle="ledger").agent
    on_server(owner, ledger, provider_server)
    provider_server.stream(*flood())

    request = request_create(group=group, text="Go.")
    drive(request, limit=40)

    assert request.state == "completed", request.outcome
    assert len(provider_server.requests) == 1, "a reply too large is not asked for again"
    kept = CallReservation.objects.get(request=request, agent=ledger)
    assert (kept.status, kept.reason) == ("consumed", "REPLY_TOO_LARGE")
    notice = Message.objects.get(request=request, kind="notice")
    assert notice.content[0]["text"] == (
        "@ledger's contribution did not come: its model call failed (REPLY_TOO_LARGE: The "
        "reply was far longer than the call asked for; it was cut off)."
    )
    answer = next(
        b
        for m in Message.objects.filter(request=request, speaker_agent=group.coordinator)
        for b in m.content
        if b["type"] == "tool_result"
    )
    assert answer["is_error"] and "REPLY_TOO_LARGE" in answer["content"]


def test_a_nested_json_reply_is_malformed_once_and_the_sweeper_calls_no_one_again(
    celery_worker_thread, group_factory, owner, provider_server
):
    group = group_factory(concierge_rules=[], members={})
    on_server(owner, group.coordinator, provider_server)
    provider_server.reply(200, nested_body())
    provider_server.reply(200, nested_body())

    request = request_create(group=group, text="Hello?")
    wait_for(lambda: ended(request))

    assert request.state == "failed"
    assert request.outcome_code == "PROVIDER_MALFORMED_REPLY"
    [reservation] = CallReservation.objects.filter(request=request)
    assert (reservation.status, reservation.reason) == ("consumed", "PROVIDER_MALFORMED_REPLY")
    # However long after, the sweeper finds nothing stranded to put back on its way.
    found = sweep_stranded(older_than_seconds=0)
    assert found["continued"] == found["reclaimed"] == 0
    _wait_until_worker_idle()
    assert len(provider_server.requests) == 1
    request.refresh_from_db()
    assert request.state == "failed"


@pytest.mark.django_db
def test_a_reply_past_the_turn_cap_is_kept_as_an_artifact_and_its_turn_clipped(
    group_factory, owner, provider_server, settings
):
    settings.GARDEN_TURN_MAX_CHARS = 5_000
    whole = "".join(f"Line {i}: the figures as they stand. " for i in range(300))  # ~11,000
    ask = {"name": "group.ask", "arguments": {"member": "ledger", "request": "All figures."}}
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Concluded."},
            {"reply": {"tool_calls": [ask]}},
        ],
        members={"ledger": []},
    )
    ledger = group.memberships.get(agent__handle="ledger").agent
    on_server(owner, ledger, provider_server)
    provider_server.reply(200, openai_reply(whole))

    request = request_create(group=group, text="Go.")
    drive(request, limit=40)

    assert request.state == "completed", request.outcome
    turn = Message.objects.get(request=request, speaker_agent=ledger, kind="turn")
    text, ref = turn.content
    artifact = Artifact.objects.get(pk=int(ref["artifact_id"]))
    assert ref == {
        "type": "artifact_ref",
        "artifact_id": str(artifact.pk),
        "kind": "document",
        "title": f"@ledger's reply ({len(whole):,} characters)",
    }
    assert artifact.content == whole and artifact.owner_id == owner.pk
    assert text["text"].startswith(whole[:5_000])
    assert text["text"].endswith(
        f"[{len(whole) - 5_000:,} more characters clipped: the whole reply is kept as "
        f"artifact {artifact.pk}.]"
    )
    # The coordinator's answer to its ask copies the clipped turn, not the whole reply.
    answer = next(
        b
        for m in Message.objects.filter(request=request, speaker_agent=group.coordinator)
        for b in m.content
        if b["type"] == "tool_result"
    )
    assert whole not in answer["content"] and text["text"] in answer["content"]
