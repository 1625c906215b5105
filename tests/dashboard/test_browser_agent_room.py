"""Talking to one agent in a browser, against daphne and a real worker: the roster's agent opens
its room (the same room page as a group's), a message's answer streams in, a tool action is
approved inline, Stop ends a running request, and its settings are one click away."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from garden.models import Agent, Artifact, Conversation, Message
from groups.models import Approval, GroupRequest
from tests.conftest import wait_for
from tests.dashboard.conftest import assert_accessible, assert_controls_labelled
from tests.dashboard.helpers import caught_up
from tests.garden.providers.httpserver import ScriptedServer
from tests.groups.helpers import on_server, openai_stream, writer
from tests.support.providers import openai_reply
from tests.support.workers import worker_quiescent

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]

ANSWER = "This month you spent 3,150, and 1,050 is left: 800 of it can go to savings."


@pytest.fixture
def model_server(loopback_providers) -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    yield server
    server.close()


@pytest.fixture
def ledger(owner):
    return writer(owner)


def open_agent_room(open_page, owner, agent):
    """From the roster, the agent's room, once its live connection is up."""
    page = open_page(owner, "/dashboard/")
    page.locator("#agent-list").get_by_role("link", name=re.compile(agent.name)).click()
    expect(page).to_have_url(re.compile(rf"/dashboard/agents/{agent.pk}/room/$"))
    expect(page.locator("#live")).to_have_text("Live")
    return page


def send(page, agent, text: str) -> None:
    page.get_by_label(f"Message to {agent.name}").fill(text)
    page.get_by_role("button", name="Send").click()


def test_the_roster_opens_an_agents_room_where_its_answer_streams_in(
    open_page, owner, ledger, live_worker, model_server
):
    on_server(owner, ledger, model_server)
    model_server.stream(*openai_stream(openai_reply(ANSWER), pieces=6), interval=0.4)
    page = open_agent_room(open_page, owner, ledger)
    expect(page.get_by_role("heading", level=1)).to_have_text("Ledger")
    assert_accessible(page)
    assert_controls_labelled(page)

    send(page, ledger, "How did this month look?")
    draft = page.locator("#transcript .turn.draft")
    expect(draft).to_contain_text("This month you spent")
    expect(draft.locator(".speaker")).to_have_text("Ledger")
    turn = page.locator("#transcript .turn--agent", has_text="can go to savings.")
    expect(turn).to_be_visible()
    expect(draft).to_have_count(0)
    expect(page.locator("#budget")).to_contain_text("Completed")
    conversation = Conversation.objects.get(owner=owner, agent=ledger)
    request = GroupRequest.objects.get(conversation=conversation)
    assert (request.state, request.working_reserved) == ("completed", 1)
    assert_accessible(page)

    # Its settings are one click away.
    page.get_by_role("link", name="Ledger's settings").click()
    expect(page).to_have_url(re.compile(rf"/dashboard/agents/{ledger.pk}/$"))


def test_an_action_is_approved_inline_in_the_agents_room(open_page, owner, ledger, live_worker):
    page = open_agent_room(open_page, owner, ledger)
    send(page, ledger, "Write down the plan.")
    card = page.locator(".approval")
    expect(card).to_contain_text("Ledger wants to write Plan")
    assert_accessible(page)
    expect(page.locator("#budget")).to_contain_text("Waiting for your approval")
    card.get_by_role("button", name=re.compile("^Approve")).click()
    expect(page.locator("#transcript")).to_contain_text("Written.")
    approval = Approval.objects.get(agent=ledger)
    assert (approval.status, approval.surface) == ("approved", "dashboard")
    assert Artifact.objects.filter(title="Plan").count() == 1
    # What it made opens on the room's Canvas.
    expect(page.locator("#canvas")).to_contain_text("Plan")


def test_stop_ends_the_agents_running_request(open_page, owner, ledger, live_worker, model_server):
    on_server(owner, ledger, model_server)
    model_server.stream(*openai_stream(openai_reply(ANSWER), pieces=8), interval=0.5)
    page = open_agent_room(open_page, owner, ledger)
    send(page, ledger, "How did this month look?")
    expect(page.locator("#transcript .turn.draft")).to_contain_text("This month you spent")
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("#budget")).to_contain_text("Stopped")
    request = GroupRequest.objects.get(conversation__agent=ledger)
    wait_for(lambda: GroupRequest.objects.get(pk=request.pk).state == "stopped")
    worker_quiescent()
    caught_up(page, request.conversation, channel=f"group-{request.group_id}")
    # What Ledger had written stays as its turn, marked stopped; the rest never comes.
    (kept,) = Message.objects.filter(request=request, speaker_kind="agent")
    assert kept.stopped_at is not None and ANSWER.startswith(kept.content[0]["text"])
    expect(page.locator("#transcript .turn--stopped")).to_contain_text("This month you spent")
    expect(page.locator("#transcript", has_text="can go to savings")).to_have_count(0)
    assert Agent.objects.get(pk=ledger.pk).can_run


def test_an_action_is_approved_with_changes_from_its_card(open_page, owner, ledger, live_worker):
    page = open_agent_room(open_page, owner, ledger)
    send(page, ledger, "Write down the plan.")
    card = page.locator(".approval")
    expect(card).to_contain_text("Ledger wants to write Plan")
    card.get_by_role("button", name=re.compile("^Edit before approving")).click()
    sheet = page.get_by_role("dialog", name="Approve with changes")
    expect(sheet).to_be_visible()
    assert_accessible(page)
    sheet.get_by_label("content").fill("Save 900 a month.")
    sheet.get_by_role("button", name="Approve with these").click()
    expect(sheet).to_be_hidden()
    expect(page.locator("#transcript")).to_contain_text("Written.")
    expect(card).to_contain_text("Approved with these arguments instead:")
    expect(card).to_contain_text("Save 900 a month.")
    approval = Approval.objects.get(agent=ledger)
    assert approval.approved_arguments == {"title": "Plan", "content": "Save 900 a month."}
    [made] = Artifact.objects.filter(title="Plan")
    assert made.content == "Save 900 a month."
