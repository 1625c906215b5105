"""The roster says who needs you: each group's state — working, waiting for your approval,
failed — live from the groups' events, and the tab's title counts the approvals waiting."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from garden.models import Agent
from groups.models import Approval
from groups.services.approvals import approval_decide
from groups.services.requests import request_create
from tests.conftest import wait_for
from tests.dashboard.conftest import assert_accessible, open_room
from tests.dashboard.helpers import household, team_with_scribe
from tests.garden.providers.httpserver import unused_port
from tests.groups.helpers import on_server

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]


def state_of(page, group):
    return page.locator(f'[data-group-state="{group.pk}"]')


def test_a_group_waiting_for_your_approval_says_so_on_the_roster_and_in_the_title(
    open_page, owner, live_worker
):
    group = team_with_scribe(owner)
    page = open_page(owner, "/dashboard/")
    expect(state_of(page, group)).to_be_hidden()
    title = page.title()
    scribe = Agent.objects.get(owner=owner, handle="scribe")
    agent_tag = page.locator(f'[data-agent-state="{scribe.pk}"]')
    expect(agent_tag).to_be_hidden()
    request_create(group=group, text="@scribe write the plan down")
    expect(state_of(page, group)).to_have_text("Waiting for your approval")
    expect(page).to_have_title(f"(1) {title}")
    # The agent whose action waits says so too.
    expect(agent_tag).to_have_text("Waiting for your approval")
    assert_accessible(page)
    # Reloaded, the roster says the same from the database.
    page.reload()
    expect(state_of(page, group)).to_have_text("Waiting for your approval")
    expect(agent_tag).to_have_text("Waiting for your approval")
    # The room's title counts the approvals waiting there, until one is decided.
    room = open_room(open_page, owner, group)
    expect(room.locator(".approval")).to_be_visible()
    expect(room).to_have_title(re.compile(r"^\(1\) "))
    approval = wait_for(lambda: Approval.objects.filter(status="pending").first())
    approval_decide(user=owner, approval_id=approval.pk, decision="approve")
    expect(state_of(page, group)).to_be_hidden()
    expect(agent_tag).to_be_hidden()
    expect(page).to_have_title(title)
    expect(room).not_to_have_title(re.compile(r"^\(\d+\) "))


def test_a_failed_request_says_failed(open_page, owner, live_worker, loopback_providers, settings):
    settings.GARDEN_PROVIDER_RETRY_ATTEMPTS = 1
    broken = household(owner)
    concierge = Agent.objects.get(owner=owner, handle="concierge")
    page = open_page(owner, "/dashboard/")
    on_server(owner, concierge, type("Down", (), {"url": f"http://127.0.0.1:{unused_port()}"}))
    request_create(group=broken, text="Anything?")
    expect(state_of(page, broken)).to_have_text("Failed")
    page.reload()
    expect(state_of(page, broken)).to_have_text("Failed")


def test_an_agent_whose_call_is_out_says_working_on_the_roster(open_page, owner, live_worker):
    group = household(owner, ledger_delay=3)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    page = open_page(owner, "/dashboard/")
    tag = page.locator(f'[data-agent-state="{ledger.pk}"]')
    request_create(group=group, text="Review this month's spending.")
    expect(state_of(page, group)).to_have_text("Working")
    expect(tag).to_have_text("Working")
    expect(tag).to_be_hidden(timeout=30_000)
    expect(state_of(page, group)).to_be_hidden(timeout=30_000)
