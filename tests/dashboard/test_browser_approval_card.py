"""What an approval card offers, in a browser against daphne and a real worker: only a call
that can run is offered (one that never could goes back to the model at once), and the card
shows its arguments as fields a person reads, never raw JSON — at a desktop's width and a
phone's."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from garden.models import Agent
from groups.models import Approval
from tests.dashboard.conftest import assert_accessible, open_room, send
from tests.dashboard.helpers import household, teammate

pytestmark = [pytest.mark.browser, pytest.mark.timeout(40)]

CHART = {
    "title": "Spending by month",
    "type": "bar",
    "labels": ["Jan", "Feb", "Mar"],
    "series": [{"name": "Rent", "values": [800, 800, 820]}],
}
UNEVEN = {**CHART, "title": "Uneven", "series": [{"name": "Rent", "values": [800]}]}


def charting_team(owner):
    group = household(owner)
    charter = teammate(
        owner,
        "charter",
        "Charter",
        colour="#8e44ad",
        rules=[
            {"after_tool_error": True, "reply": "The chart could not be made."},
            {"after_tool_result": True, "reply": "Charted."},
            {
                "when": "uneven",
                "reply": {"tool_calls": [{"name": "chart.create", "arguments": UNEVEN}]},
            },
            {
                "when": "chart",
                "reply": {"tool_calls": [{"name": "chart.create", "arguments": CHART}]},
            },
        ],
    )
    Agent.objects.filter(pk=charter.pk).update(
        enabled_tools=["chart.create"], approval_tools=["chart.create"]
    )
    group.memberships.create(agent=charter, position=group.memberships.count())
    return group


@pytest.mark.parametrize("width", [1366, 390])
def test_an_approval_card_shows_arguments_as_fields(open_page, owner, live_worker, width):
    group = charting_team(owner)
    page = open_room(open_page, owner, group)
    page.set_viewport_size({"width": width, "height": 900})
    send(page, "@charter chart the spending")
    card = page.locator(".approval")
    expect(card).to_contain_text("Charter wants to make the chart Spending by month")
    args = card.locator("dl.approval-args").first

    def field(name: str):
        return args.locator(f"xpath=./dt[.='{name}']/following-sibling::dd[1]")

    assert sorted(args.locator(":scope > dt").all_inner_texts()) == [
        "labels",
        "series",
        "title",
        "type",
    ]
    expect(field("labels")).to_have_text("Jan, Feb, Mar")
    expect(field("type")).to_have_text("bar")
    series = field("series")
    expect(series.locator("dt")).to_have_count(2)
    expect(series.locator("xpath=.//dt[.='name']/following-sibling::dd[1]")).to_have_text("Rent")
    expect(series.locator("xpath=.//dt[.='values']/following-sibling::dd[1]")).to_have_text(
        "800, 800, 820"
    )
    text = args.inner_text()
    assert not re.search(r"[\[\]{}\"]", text), text
    assert_accessible(page)
    card.get_by_role("button", name=re.compile("^Approve")).click()
    expect(page.locator(".turn--agent", has_text="Charted.")).to_be_visible()
    expect(card).to_contain_text("it ran.")


@pytest.mark.parametrize("width", [1366, 390])
def test_a_call_that_can_never_run_is_never_offered(open_page, owner, live_worker, width):
    group = charting_team(owner)
    page = open_room(open_page, owner, group)
    page.set_viewport_size({"width": width, "height": 900})
    send(page, "@charter chart it uneven")
    expect(page.locator(".turn--agent", has_text="The chart could not be made.")).to_be_visible()
    expect(page.locator("#budget")).to_contain_text("Completed")
    expect(page.locator(".approval")).to_have_count(0)
    assert not Approval.objects.exists()
    # The refusal is said in the turn itself, not only in a closed row.
    expect(page.locator(".turn--agent", has_text="INVALID_CHART")).to_be_visible()
    assert_accessible(page)
