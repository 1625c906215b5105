"""Watching the team think, in a browser against daphne and a real worker: the coordinator's
model is a local OpenAI-compatible server that streams its answer slowly, so the room shows who
is working and the answer as it is written before the turn is stored — and nothing of it after
Stop."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from garden.models import Agent, Message
from groups.models import GroupRequest
from tests.dashboard.conftest import open_room, send
from tests.dashboard.helpers import caught_up, household
from tests.garden.providers.httpserver import ScriptedServer
from tests.groups.helpers import on_server, openai_stream
from tests.support.providers import openai_reply
from tests.support.workers import worker_quiescent

pytestmark = [pytest.mark.browser, pytest.mark.timeout(40)]

ANSWER = (
    "Here is where you stand: income 4,200, spending 3,150, so about 1,050 a month is free "
    "and 800 of it can go to savings by standing order."
)


@pytest.fixture
def model_server(loopback_providers) -> Iterator[ScriptedServer]:
    """The coordinator's model: a real local HTTP server speaking chat completions."""
    server = ScriptedServer()
    yield server
    server.close()


def slow_coordinator(owner, server: ScriptedServer, *, pieces: int, interval: float):
    """Household finances with Concierge on ``server``, which streams ANSWER in ``pieces``;
    returns the group and how many events the stream sends."""
    group = household(owner)
    on_server(owner, Agent.objects.get(owner=owner, handle="concierge"), server)
    events = openai_stream(openai_reply(ANSWER, usage=(1234, 210)), pieces=pieces)
    server.stream(*events, interval=interval)
    return group, len(events)


def agent_turns(group) -> int:
    return Message.objects.filter(request__group=group, speaker_kind="agent").count()


def test_the_answer_streams_in_before_its_turn_lands(open_page, owner, live_worker, model_server):
    group, _ = slow_coordinator(owner, model_server, pieces=6, interval=0.4)
    page = open_room(open_page, owner, group)
    send(page, "How much can I save?")

    budget = page.locator("#budget")
    expect(budget.locator(".working")).to_contain_text("Concierge")
    expect(budget.locator(".working-time")).to_contain_text(" s")
    draft = page.locator("#transcript .turn.draft")
    expect(draft).to_contain_text("Here is where you stand")
    expect(draft.locator(".speaker")).to_have_text("Concierge")
    # Shown while it is written: the stored turn does not exist yet.
    assert agent_turns(group) == 0
    assert draft.inner_text().count("standing order") == 0

    turn = page.locator("#transcript .turn--agent", has_text="by standing order.")
    expect(turn).to_be_visible()
    expect(draft).to_have_count(0)
    expect(budget).to_contain_text("Completed")
    expect(budget.locator(".working")).to_have_count(0)
    expect(budget).to_contain_text("1,234 tokens in · 210 out")
    # Each member's share opens from the figure (read from the request's costs).
    budget.locator("details.usage summary").click()
    expect(budget.locator(".member-costs li")).to_have_count(1)
    expect(budget.locator(".member-costs li")).to_contain_text(
        "Concierge: 1 call · 1,234 in · 210 out"
    )
    request = GroupRequest.objects.get(group=group)
    assert (request.input_tokens, request.output_tokens) == (1234, 210)
    assert agent_turns(group) == 1


def test_stop_mid_stream_keeps_what_was_written_as_a_stopped_turn(
    open_page, owner, live_worker, model_server
):
    group, sent = slow_coordinator(owner, model_server, pieces=8, interval=0.4)
    page = open_room(open_page, owner, group)
    send(page, "How much can I save?")
    draft = page.locator("#transcript .turn.draft")
    expect(draft).to_contain_text("Here is where you stand")

    page.get_by_role("button", name="Stop").click()

    expect(page.locator("#budget")).to_contain_text("Stopped")
    expect(draft).to_have_count(0)
    stopped = page.locator("#transcript .turn--agent.turn--stopped")
    expect(stopped).to_contain_text("Here is where you stand")
    expect(stopped.locator(".tag--stopped")).to_have_text("Stopped")
    # The worker abandons the stream; nothing after what was shown reaches the page or the
    # database.
    worker_quiescent()
    assert model_server.sent < sent
    caught_up(page, GroupRequest.objects.get(group=group).conversation, channel=f"group-{group.pk}")
    expect(page.locator("#transcript", has_text="standing order")).to_have_count(0)
    request = GroupRequest.objects.get(group=group)
    assert request.state == "stopped"
    (turn,) = Message.objects.filter(request__group=group, speaker_kind="agent")
    assert turn.stopped_at is not None and ANSWER.startswith(turn.content[0]["text"])
    assert request.working_reserved == 1

    # A reload shows it the same way.
    page.reload()
    stopped = page.locator("#transcript .turn--agent.turn--stopped")
    expect(stopped).to_contain_text("Here is where you stand")
    expect(stopped.locator(".tag--stopped")).to_have_text("Stopped")
