"""An agent's conversations in a browser, on a desktop and on a phone, against daphne and a real
worker: New conversation opens an empty one, a message there is answered there, the first one
is a click away with its turns, and Rename names it in the list — the page accessible
throughout, the phone's list opening over the room without pushing it off screen."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from dashboard import consumers
from garden.models import Conversation
from garden.services.conversations import conversation_create, message_append, text_block
from groups.services.requests import conversation_request_create
from tests.conftest import wait_for
from tests.dashboard.conftest import assert_accessible, assert_controls_labelled
from tests.dashboard.helpers import teammate
from tests.dashboard.test_browser_notifications import RECORD_NOTIFICATIONS, notices
from tests.support.driving import finished
from tests.support.workers import worker_quiescent

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def ledger(owner):
    return teammate(
        owner, "ledger", "Ledger", rules=[{"when": "groceries", "reply": "Groceries were 410."}]
    )


def first_conversation(owner, ledger) -> Conversation:
    """An earlier conversation with Ledger: the rent asked about and answered."""
    conversation = conversation_create(owner=owner, agent=ledger)
    message_append(
        conversation_id=conversation.pk,
        speaker_kind="owner",
        content=[text_block("What is the rent?")],
    )
    message_append(
        conversation_id=conversation.pk,
        speaker_kind="agent",
        speaker_agent=ledger,
        content=[text_block("Rent is 1,200.")],
    )
    return conversation


def conversations(page, phone: bool):
    """The list, opened from its bar on a phone."""
    nav = page.get_by_role("navigation", name="Conversations")
    if phone:
        toggle = nav.get_by_role("button", name=re.compile("^Conversations:"))
        if toggle.get_attribute("aria-expanded") != "true":
            toggle.click()
        expect(toggle).to_have_attribute("aria-expanded", "true")
    return nav


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_new_conversation_is_answered_there_and_the_first_is_a_click_away(
    open_page, owner, ledger, live_worker, viewport
):
    phone = viewport is PHONE
    first = first_conversation(owner, ledger)
    page = open_page(owner, f"/dashboard/agents/{ledger.pk}/room/")
    page.set_viewport_size(viewport)
    expect(page.locator("#live")).to_have_text("Live")
    expect(page.locator("#transcript")).to_contain_text("Rent is 1,200.")
    nav = conversations(page, phone)
    current = nav.locator("a[aria-current=page]")
    expect(current).to_contain_text("What is the rent?")
    if phone:
        # Open, the list lies over the room: the room's header and message box stay in view.
        expect(nav.get_by_role("button", name="New conversation", exact=True)).to_be_in_viewport()
        expect(page.get_by_role("heading", level=1)).to_be_in_viewport()
        expect(page.get_by_label("Message to Ledger")).to_be_in_viewport()
    assert_accessible(page)
    assert_controls_labelled(page)
    if phone:
        # Tabbing on past its last entry closes the list; its bar opens it again.
        nav.get_by_role("button", name="Rename What is the rent?").focus()
        page.keyboard.press("Tab")
        expect(nav.get_by_role("button", name=re.compile("^Conversations:"))).to_have_attribute(
            "aria-expanded", "false"
        )
        nav = conversations(page, phone)

    nav.get_by_role("button", name="New conversation", exact=True).click()
    expect(page).to_have_url(re.compile(r"\?conversation=\d+$"))
    made = Conversation.objects.filter(owner=owner, agent=ledger).exclude(pk=first.pk).get()
    assert page.url.endswith(f"?conversation={made.pk}")
    expect(page.locator("#live")).to_have_text("Live")
    expect(page.locator("#transcript")).not_to_contain_text("Rent is 1,200.")
    nav = conversations(page, phone)
    expect(nav.locator("a[aria-current=page]")).to_have_text(re.compile("New conversation"))
    expect(nav.locator("a.thread-link")).to_have_count(2)
    if phone:
        page.keyboard.press("Escape")
        expect(page.get_by_role("button", name=re.compile("^Conversations:"))).to_have_attribute(
            "aria-expanded", "false"
        )
        expect(nav.get_by_role("button", name="New conversation", exact=True)).to_be_hidden()

    page.get_by_label("Message to Ledger").fill("And groceries?")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#transcript .turn--agent", has_text="Groceries were 410.")).to_be_visible()
    # Spoken in, it is named by its first words and leads the list, without a reload.
    nav = conversations(page, phone)
    expect(nav.locator("a.thread-link").first).to_have_attribute("aria-current", "page")
    expect(nav.locator("a[aria-current=page]")).to_contain_text("And groceries?")
    expect(nav.get_by_role("button", name="Rename And groceries?")).to_be_visible()
    assert [m.text for m in made.messages.order_by("seq")] == [
        "And groceries?",
        "Groceries were 410.",
    ]
    assert first.messages.count() == 2

    # Back to the first: its turns, and none of the second's.
    nav = conversations(page, phone)
    nav.get_by_role("link", name=re.compile("What is the rent?")).click()
    expect(page).to_have_url(re.compile(rf"\?conversation={first.pk}$"))
    expect(page.locator("#transcript")).to_contain_text("Rent is 1,200.")
    expect(page.locator("#transcript")).not_to_contain_text("Groceries were 410.")
    nav = conversations(page, phone)
    # The second was spoken in last: it leads the list, by its first words.
    expect(nav.locator("a.thread-link").first).to_contain_text("And groceries?")

    nav.get_by_role("button", name="Rename What is the rent?").click()
    dialog = page.get_by_role("dialog", name="Rename conversation")
    expect(dialog).to_be_visible()
    assert_accessible(page)
    dialog.get_by_label("Title").fill("x" * 100 + "y")
    # The field takes a hundred characters at most; the server says the same by name.
    expect(dialog.get_by_label("Title")).to_have_value("x" * 100)
    dialog.get_by_label("Title").fill("Rent\tand more")
    dialog.get_by_role("button", name="Rename").click()
    expect(dialog).to_contain_text("one line of text")
    dialog.get_by_label("Title").fill("Rent talk")
    dialog.get_by_role("button", name="Rename").click()
    expect(dialog).to_be_hidden()
    # The focus goes back where it came from (on a phone the list closed: to its bar).
    back = "#threads-toggle" if phone else "#thread-rename"
    expect(page.locator(back)).to_be_focused()
    nav = conversations(page, phone)
    expect(nav.locator("a[aria-current=page]")).to_contain_text("Rent talk")
    assert Conversation.objects.get(pk=first.pk).title == "Rent talk"
    page.reload()
    expect(page.locator("#live")).to_have_text("Live")
    nav = conversations(page, phone)
    expect(nav.get_by_role("link", name=re.compile("Rent talk"))).to_have_attribute(
        "aria-current", "page"
    )
    assert_accessible(page)
    expect(nav.locator("a.thread-link").first).to_contain_text("And groceries?")
    if phone:
        page.keyboard.press("Escape")
    # Spoken in again, the first leads the list.
    page.get_by_label("Message to Ledger").fill("One more thing.")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#transcript")).to_contain_text("One more thing.")
    nav = conversations(page, phone)
    expect(nav.locator("a.thread-link").first).to_contain_text("Rent talk")


def test_a_reply_in_another_conversation_notifies_and_one_in_the_conversation_shown_does_not(
    open_page, owner, live_worker
):
    rules = [{"when": "again", "reply": "Still 1,400."}, {"reply": "Rent is 1,400."}]
    ledger = teammate(owner, "ledger", "Ledger", rules=rules)
    shown, other = (conversation_create(owner=owner, agent=ledger) for _ in range(2))
    page = open_page(owner, f"/dashboard/agents/{ledger.pk}/room/?conversation={shown.pk}")
    page.context.add_init_script(RECORD_NOTIFICATIONS)
    page.context.grant_permissions(["notifications"])
    page.reload()
    expect(page.locator("#live")).to_have_text("Live")
    wait_for(lambda: consumers._open.get(owner.pk, 0) == 2)  # the room's and the notices'
    here = conversation_request_create(owner=owner, conversation=shown, text="The rent?")
    wait_for(finished(here), timeout=60)
    expect(page.locator("#transcript")).to_contain_text("Rent is 1,400.")
    worker_quiescent()
    # The positive signal: the other conversation's reply notifies; the one shown never did.
    there = conversation_request_create(owner=owner, conversation=other, text="The rent again?")
    wait_for(finished(there), timeout=60)
    page.wait_for_function("() => window.__notices.length === 1")
    assert notices(page) == [{"title": "Ledger", "body": "Still 1,400."}]
