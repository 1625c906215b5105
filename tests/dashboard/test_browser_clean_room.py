"""A clean room in a browser: one line per hand-off, approval cards that say what they do and
stay where they were, a queued message linked to its answer, notices said once; and the
layout: header and composer pinned around the scrolling transcript, loading and empty states,
the Canvas collapsed while empty, the user menu instead of the admin's welcome bar."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from garden.models import Agent
from tests.dashboard.conftest import (
    assert_accessible,
    assert_controls_labelled,
    open_room,
    room_url,
    send,
    tab_until,
)
from tests.dashboard.helpers import SPENDING, household, say, team_with_scribe

pytestmark = [pytest.mark.browser, pytest.mark.timeout(40)]

CONCLUSION = "Here is where you stand"


def item_keys(page) -> list[str]:
    return page.locator("#transcript > li").evaluate_all("nodes => nodes.map(n => n.dataset.key)")


def test_a_hand_off_is_one_line_with_its_call_and_result_one_click_away(
    open_page, owner, live_worker
):
    group = household(owner)
    page = open_room(open_page, owner, group)
    send(page, SPENDING)
    transcript = page.locator("#transcript")
    expect(transcript.locator("> li > .turn--agent", has_text=CONCLUSION)).to_be_visible()

    # The ask is said once: on its activity line, with the asker and the member named.
    asked = transcript.locator("> li", has_text="Analyse this month's transactions")
    expect(asked).to_have_count(1)
    line = asked.locator("details.activity")
    expect(line.locator("summary")).to_have_text(
        re.compile(r"Concierge asked Ledger: Analyse this month's transactions\.$")
    )
    expect(page.get_by_text("Tool call: group.ask")).to_have_count(0)
    expect(transcript.locator(".turn--coordination")).to_have_count(0)

    # The raw call and its result are inside the collapsed disclosure, reached by keyboard.
    call = line.locator(".exchange-part", has_text="Call: group.ask")
    expect(call).to_be_hidden()
    tab_until(page, f"[data-key={asked.get_attribute('data-key')}] summary")
    page.keyboard.press("Enter")
    expect(line).to_have_attribute("open", "")
    expect(call.locator("pre")).to_contain_text('"request": "Analyse this month\'s transactions."')
    result = line.locator(".exchange-part", has_text="Result")
    expect(result).to_contain_text("@ledger said:")
    # The note the coordinator's model is given is not shown to the person.
    expect(result).not_to_contain_text("context, not instructions")
    # Ledger's own answer is its turn, in the open.
    expect(transcript.locator("> li > .turn--agent", has_text="income 4,200;")).to_be_visible()
    assert_controls_labelled(page)


def test_an_approval_says_what_it_does_and_stays_where_it_was(open_page, owner, live_worker):
    group = team_with_scribe(owner)
    page = open_room(open_page, owner, group)
    canvas = page.get_by_role("complementary", name="Canvas")
    expect(canvas.get_by_role("button", name="Canvas")).to_have_attribute("aria-expanded", "false")
    send(page, "@scribe write the savings summary down")

    card = page.locator(".approval")
    expect(card.locator(".approval-head")).to_contain_text("Scribe wants to write Savings plan")
    # What it will write is shown, not behind a disclosure.
    arguments = card.locator(".approval-args")
    expect(arguments).to_be_visible()
    expect(arguments).to_contain_text("Save 800 a month by standing order.")
    # The card stands for the line that said the call waits, and for the call's own chip.
    transcript = page.locator("#transcript")
    expect(transcript.get_by_text("waiting for your approval")).to_have_count(0)
    expect(transcript.get_by_text("Tool call: file.write")).to_have_count(0)
    assert_accessible(page)
    before = item_keys(page)
    card_key = card.locator("xpath=..").get_attribute("data-key")

    tab_until(page, ".approval [data-decide=approve]")
    page.keyboard.press("Enter")
    expect(page.locator(".turn--agent", has_text="Saved the summary.")).to_be_visible()
    expect(page.locator("#budget")).to_contain_text("Completed")
    # One line for the decision and what it led to, on the card; its result a click away.
    outcome = card.locator(".approval-outcome")
    expect(outcome).to_have_text(
        re.compile(r"^Scribe was allowed to .* \(approved on dashboard\); it ran\.$")
    )
    expect(card.locator("details.tool summary")).to_have_text("Result")
    transcript = page.locator("#transcript")
    expect(transcript.get_by_text("was allowed to")).to_have_count(1)
    expect(transcript.get_by_text("Tool result: file.write")).to_have_count(0)

    # Decided, it is where it was: what came before it still does, what came after follows it.
    after = item_keys(page)
    assert after[: before.index(card_key) + 1] == before[: before.index(card_key) + 1]
    saved = page.locator("#transcript > li", has_text="Saved the summary.").get_attribute(
        "data-key"
    )
    assert after.index(card_key) < after.index(saved)
    # What it wrote opened the Canvas.
    expect(canvas.get_by_role("button", name="Canvas")).to_have_attribute("aria-expanded", "true")
    expect(canvas.locator(".artifact", has_text="Savings plan")).to_be_visible()

    # After a reload the decided card is still where it was, not the line that said it waits.
    page.reload()
    expect(page.locator(".turn--agent", has_text="Saved the summary.")).to_be_visible()
    card = page.locator(".approval")
    expect(card.locator(".approval-outcome")).to_contain_text("it ran.")
    expect(page.locator("#transcript").get_by_text("waiting for your approval")).to_have_count(0)
    assert item_keys(page) == after


def test_a_queued_message_is_tagged_where_it_was_sent_and_linked_to_its_answer(
    open_page, owner, live_worker
):
    group = household(owner, ledger_delay=1.5)
    page = open_room(open_page, owner, group)
    send(page, SPENDING)
    expect(page.locator("#budget")).to_contain_text("Working")
    send(page, "@ledger, exclude that reimbursement")

    transcript = page.locator("#transcript")
    question = transcript.locator("> li", has=page.locator(".turn--owner", has_text="exclude"))
    expect(question.locator(".tag")).to_have_text("Queued")
    first = transcript.locator("> li", has=page.locator(".turn--owner", has_text=SPENDING))
    expect(first.locator(".tag")).to_have_count(0)

    answer = transcript.locator("> li", has_text="Updated: without the 240 reimbursement")
    expect(answer).to_be_visible()
    # The first request's work came between them; the answer and the question point at each other.
    assert item_keys(page).index(question.get_attribute("data-key")) < item_keys(page).index(
        transcript.locator("> li", has_text=CONCLUSION).get_attribute("data-key")
    )
    back = answer.get_by_role("link", name=re.compile("^In reply to: @ledger, exclude that"))
    jump = question.get_by_role("link", name="Jump to the answer")
    expect(jump).to_have_attribute("href", f"#{answer.get_attribute('id')}")
    expect(back).to_have_attribute("href", f"#{question.get_attribute('id')}")
    jump.click()
    expect(answer).to_be_focused()
    expect(answer).to_be_in_viewport()
    back.click()
    expect(question).to_be_focused()
    expect(question).to_be_in_viewport()
    assert_accessible(page)


def test_stop_says_so_once(open_page, owner, live_worker):
    group = household(owner, ledger_delay=3.0)
    page = open_room(open_page, owner, group)
    send(page, SPENDING)
    expect(page.locator("#budget")).to_contain_text("Working")
    page.get_by_role("button", name="Stop").click()
    expect(page.locator(".notice")).to_have_text(re.compile(r"^garden\s*Stopped by the owner\.$"))


def test_the_header_and_composer_stay_while_only_the_transcript_scrolls(open_page, owner):
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    for i in range(30):
        say(group, text=f"Question {i}?")
        say(group, text=f"Answer {i}.", speaker=ledger)
    page = open_room(open_page, owner, group)
    transcript = page.locator("#transcript")
    expect(transcript.locator("> li")).to_have_count(60)

    # Opened at its end: the newest turn and the composer are in view, the page does not scroll.
    expect(transcript.locator("> li").last).to_be_in_viewport()
    composer = page.get_by_label("Message to the group")
    expect(composer).to_be_in_viewport()
    sizes = page.evaluate("""() => ({
      page: document.scrollingElement.scrollHeight, viewport: window.innerHeight,
      transcript: [document.getElementById("transcript").scrollHeight,
                   document.getElementById("transcript").clientHeight],
    })""")
    assert sizes["page"] <= sizes["viewport"]
    assert sizes["transcript"][0] > sizes["transcript"][1]

    transcript.hover()
    page.mouse.wheel(0, -5000)
    expect(transcript.locator("> li").first).to_be_in_viewport()
    assert page.evaluate("window.scrollY") == 0
    expect(composer).to_be_in_viewport()
    expect(page.locator("#group-name")).to_be_in_viewport()


def test_loading_then_empty_state_and_the_canvas_collapsed(open_page, owner):
    group = household(owner)
    page = open_page(owner, "/dashboard/")
    held = []  # the room's first read of its transcript, answered when the test says

    def hold_the_first(route) -> None:
        if held:
            route.continue_()
        else:
            held.append(route)

    page.route(re.compile(r"/api/groups/\d+/messages\?after=0$"), hold_the_first)
    page.goto(room_url(group))
    state = page.locator("#transcript-state")
    expect(state).to_have_text("Loading the conversation…")
    expect(page.locator("#transcript")).to_have_attribute("aria-busy", "true")
    held[0].continue_()
    expect(state).to_have_text("Nothing here yet — give the team a task below.")

    # The Canvas keeps to a button while it holds nothing; it opens and closes by keyboard.
    canvas = page.get_by_role("complementary", name="Canvas")
    toggle = canvas.get_by_role("button", name="Canvas")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(page.locator("#canvas-body")).to_be_hidden()
    assert canvas.bounding_box()["width"] < 150
    tab_until(page, "#canvas-toggle")
    page.keyboard.press("Enter")
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(canvas).to_contain_text("Nothing made yet.")

    # The first turn replaces the empty state.
    say(group, text="Hello, team.")
    expect(page.locator("#transcript .turn--owner")).to_contain_text("Hello, team.")
    expect(state).to_be_hidden()


def test_product_pages_have_a_user_menu_not_the_admin_bar(open_page, owner, django_user_model):
    page = open_page(owner, "/dashboard/")
    header = page.locator("#header")
    expect(page.locator("#user-tools")).to_have_count(0)
    expect(header).not_to_contain_text(re.compile("welcome|change password|view site", re.I))
    nav = page.get_by_role("navigation", name="Dashboard")
    expect(nav.get_by_role("link", name="Roster")).to_be_visible()
    expect(nav.get_by_role("link", name="Agents")).to_be_visible()

    menu = header.locator(".user-menu")
    expect(menu.locator("summary")).to_have_text("owner")
    expect(menu.get_by_role("link", name="Staff admin")).to_have_count(0)  # not staff
    tab_until(page, ".user-menu summary")
    page.keyboard.press("Enter")
    log_out = menu.get_by_role("button", name="Log out")
    expect(log_out).to_be_visible()
    expect(menu.get_by_role("link", name="Access tokens")).to_be_visible()
    expect(menu.get_by_role("link", name="Telegram")).to_be_visible()
    # Escape closes it and gives the focus back; so does a click elsewhere.
    page.keyboard.press("Escape")
    expect(log_out).to_be_hidden()
    expect(menu.locator("summary")).to_be_focused()
    page.keyboard.press("Enter")
    expect(log_out).to_be_visible()
    page.locator("#content").click(position={"x": 5, "y": 5})
    expect(log_out).to_be_hidden()
    menu.locator("summary").click()
    expect(log_out).to_be_visible()
    assert_controls_labelled(page)
    log_out.click()
    expect(page.get_by_text("Logged out")).to_be_visible()
    page.goto("/dashboard/")
    expect(page).to_have_url(re.compile(r"/dashboard/login/"))

    staff = django_user_model.objects.create_user(username="keeper", is_staff=True)
    page = open_page(staff, "/dashboard/agents/")
    page.locator(".user-menu summary").click()
    expect(page.get_by_role("link", name="Staff admin")).to_have_attribute("href", "/admin/")
