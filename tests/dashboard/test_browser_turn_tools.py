"""What a reader does with a turn: sees when it was said (one date format), that an agent is
scripted, and copies a turn or a document."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from playwright.sync_api import expect

from garden.models import Agent
from tests.dashboard.conftest import assert_accessible, open_room
from tests.dashboard.helpers import artifact, household, say

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]


def test_a_turn_shows_its_time_says_scripted_and_copies(open_page, owner):
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    said = say(group, speaker=ledger, text="Net **1,050** this month.")
    artifact(group, agent=ledger, title="Notes", content="rent 1,400")
    page = open_room(open_page, owner, group)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    turn = page.locator("#transcript .turn--agent", has_text="Net")
    # The household's agents answer from offline scripts: their turns say so.
    expect(turn.locator(".tag--scripted")).to_have_text("scripted")
    time = turn.locator("time.turn-time")
    # The moment the API gives for the turn (ISO 8601, as every API timestamp is written).
    expect(time).to_have_attribute("datetime", re.compile(r"\d{4}-\d{2}-\d{2}T"))
    assert datetime.fromisoformat(time.get_attribute("datetime")) == said.created_at
    # The full date on hover, written as the server's pages write dates ("j M Y, H:i").
    assert re.fullmatch(r"\d{1,2} [A-Z][a-z]{2,3} \d{4}, \d{2}:\d{2}", time.get_attribute("title"))
    assert re.fullmatch(r"\d{2}:\d{2}", time.inner_text())
    turn.hover()
    expect(time).to_be_visible()
    turn.get_by_role("button", name="Copy Ledger's message").click()
    expect(turn.get_by_role("button", name="Copy Ledger's message")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == "Net **1,050** this month."

    page.locator("#canvas-list .artifact", has_text="Notes").click()
    page.get_by_role("button", name="Copy the document's text").click()
    assert page.evaluate("navigator.clipboard.readText()") == "rent 1,400"
    assert_accessible(page)
