"""The room on a phone (390 x 844): pinned like the desktop's — the header and the composer stay
in view, only the transcript scrolls, it opens at the latest turn (or the approval waiting) —
and nothing is wider than the screen, whatever the request is doing."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import assert_accessible, open_room, send
from tests.dashboard.helpers import SPENDING, household, say, team_with_scribe

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]

PHONE = {"width": 390, "height": 844}


def on_phone(open_page, owner, group):
    page = open_room(open_page, owner, group)
    page.set_viewport_size(PHONE)
    return page


def assert_fits(page) -> None:
    """No sideways scrolling, the page itself does not scroll, and Send is on screen (and Stop,
    when it shows)."""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"the page is {width} px wide"
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height <= PHONE["height"], f"the page scrolls: {height} px tall"
    for name in ("Send", "Stop"):
        button = page.get_by_role("button", name=name, exact=True)
        if button.is_visible():
            box = button.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], name
            assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"], name


def transcript_at_end(page) -> bool:
    return page.evaluate(
        "(() => { const t = document.getElementById('transcript');"
        " return t.scrollHeight - t.scrollTop - t.clientHeight < 80; })()"
    )


def test_a_long_room_opens_at_its_latest_turn_with_the_composer_in_view(
    open_page, owner, live_worker
):
    group = household(owner)
    for i in range(40):
        say(group, text=f"Turn {i}: " + "a longer line of the discussion " * 4)
    page = on_phone(open_page, owner, group)
    expect(page.locator("#transcript li").last).to_contain_text("Turn 39")
    expect(page.locator("#transcript li").last).to_be_in_viewport()
    assert transcript_at_end(page)
    assert_fits(page)
    expect(page.get_by_label("Message to the group")).to_be_in_viewport()
    assert_accessible(page)


def test_while_an_agent_works_stop_and_send_stay_on_screen(open_page, owner, live_worker):
    group = household(owner, ledger_delay=3)
    page = on_phone(open_page, owner, group)
    send(page, SPENDING)
    expect(page.locator("#budget .working")).to_contain_text("Ledger")
    expect(page.locator("#budget .working-time")).to_contain_text(" s")
    assert_fits(page)
    # "· 1 s" stays on one line.
    time_box = page.locator("#budget .working-time").bounding_box()
    assert time_box["height"] < 30
    page.get_by_role("button", name="Stop", exact=True).click()
    expect(page.locator("#budget")).to_contain_text("Stopped")
    assert_fits(page)


def test_a_waiting_approval_is_in_view_when_the_room_opens(open_page, owner, live_worker):
    group = team_with_scribe(owner)
    for i in range(30):
        say(group, text=f"Earlier turn {i}.")
    page = on_phone(open_page, owner, group)
    send(page, "@scribe write it down")
    card = page.locator(".approval")
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    assert_fits(page)
    page.reload()
    page.set_viewport_size(PHONE)
    expect(card.get_by_role("button", name="Approve")).to_be_in_viewport()
    assert_fits(page)


def test_a_queued_message_fits_too(open_page, owner, live_worker):
    group = household(owner, ledger_delay=3)
    page = on_phone(open_page, owner, group)
    send(page, SPENDING)
    expect(page.locator("#budget .working")).to_contain_text("Ledger")
    send(page, "@ledger and exclude the reimbursement")
    expect(page.locator(".tag--queued")).to_be_visible()
    assert_fits(page)
    expect(page.locator("#budget")).to_contain_text("Completed", timeout=30_000)


def test_the_roster_and_a_formatted_reply_fit_a_phone(open_page, owner, live_worker):
    group = team_with_scribe(owner)
    ledger = group.memberships.get(agent__handle="ledger").agent
    say(
        group,
        speaker=ledger,
        text="**Net 1,050.**\n\n```\n" + "a_long_unbroken_identifier_" * 8 + "\n```\n\n"
        "| month | rent |\n|---|---|\n| January | 1,400 |",
    )
    page = open_page(owner, "/dashboard/")
    page.set_viewport_size(PHONE)
    send_from_roster = page.locator(f'[data-group-state="{group.pk}"]')
    expect(send_from_roster).to_be_hidden()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page = on_phone(open_page, owner, group)
    turn = page.locator("#transcript .turn--agent", has_text="Net 1,050")
    expect(turn.locator("strong")).to_have_text("Net 1,050.")
    assert_fits(page)  # the code block and the table scroll inside the turn, not the page
    assert_accessible(page)


def test_an_agents_room_and_its_edit_sheet_fit_a_phone(open_page, owner, live_worker):
    """One agent's room at 390 px: its header (face, name, Settings), its waiting approval
    with Approve, Edit… and Reject, and the edit sheet, none wider than the screen."""
    import re

    from tests.groups.helpers import writer

    agent = writer(owner, handle="scribe")
    page = open_page(owner, f"/dashboard/agents/{agent.pk}/room/")
    page.set_viewport_size(PHONE)
    expect(page.locator("#live")).to_have_text("Live")
    page.get_by_label("Message to Scribe").fill("Please write the plan down.")
    page.get_by_role("button", name="Send").click()
    card = page.locator(".approval")
    expect(card.get_by_role("button", name=re.compile("^Approve"))).to_be_visible()
    expect(page.get_by_role("link", name="Scribe's settings")).to_be_in_viewport()
    assert_fits(page)
    for name in ("^Approve", "^Edit before approving", "^Reject"):
        box = card.get_by_role("button", name=re.compile(name)).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], name
    assert_accessible(page)
    card.get_by_role("button", name=re.compile("^Edit before approving")).click()
    sheet = page.get_by_role("dialog", name="Approve with changes")
    expect(sheet).to_be_visible()
    box = sheet.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    expect(sheet.get_by_role("button", name="Approve with these")).to_be_in_viewport()
    assert_accessible(page)
