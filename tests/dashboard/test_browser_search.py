"""Search in a browser, on a desktop (1366 px) and a phone (390 px): a word typed in the
header's box lists the turns that hold it (another owner's never), a result opens the room at
that turn, scrolled to and marked, with axe finding nothing serious; a turn of a closed thread
opens that thread, read-only, with a way back to the current one."""

from __future__ import annotations

import re

import pytest
from django.db import transaction
from django.utils import timezone
from playwright.sync_api import expect

from garden.models import Agent, Conversation, Message
from garden.services.conversations import message_append, text_block
from groups.services.requests import group_conversation_open
from tests.dashboard.conftest import assert_accessible, assert_controls_labelled
from tests.dashboard.helpers import caught_up, household, say

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
FOUND = "The rhubarb crowns went in by the shed, under a mulch of leaf mould."


def long_room(owner):
    """A room of forty turns with the word in one near its start, far above the end."""
    group = household(owner)
    for n in range(40):
        say(group, text=FOUND if n == 5 else f"Turn {n}: " + "a line of the discussion " * 4)
    return group


def search_from_header(page, word: str) -> None:
    box = page.get_by_role("search").get_by_label("Search your conversations")
    box.fill(word)
    box.press("Enter")
    expect(page).to_have_url(re.compile(rf"/dashboard/search/\?q={word}$"))


def fits(page, viewport) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= viewport["width"], f"the page is {width} px wide"


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1366px", "390px"])
def test_a_word_found_opens_the_room_at_its_turn(open_page, owner, stranger, viewport):
    group = long_room(owner)
    say(household(stranger), text="Their rhubarb, not ours.")
    page = open_page(owner, "/dashboard/")
    page.set_viewport_size(viewport)
    fits(page, viewport)
    search_from_header(page, "rhubarb")

    results = page.get_by_role("list", name=re.compile("Turns with"))
    links = results.get_by_role("link")
    expect(links).to_have_count(1)
    expect(links.first).to_contain_text("Household finances")
    expect(links.first).to_contain_text("rhubarb crowns")
    expect(links.first.locator("mark").first).to_have_text("rhubarb")
    fits(page, viewport)
    assert_accessible(page)
    assert_controls_labelled(page)

    links.first.click()
    expect(page).to_have_url(
        re.compile(rf"/dashboard/groups/{group.pk}/\?conversation=\d+#turn-6$")
    )
    found = page.locator("#transcript > li.turn-found")
    expect(found).to_have_count(1)
    expect(found).to_contain_text("rhubarb crowns")
    expect(found).to_be_in_viewport()
    expect(found).to_have_attribute("aria-current", "true")
    expect(found).to_be_focused()
    # The room opened at the turn, not at its end.
    expect(page.locator("#transcript > li").last).not_to_be_in_viewport()
    expect(page.locator("#live")).to_have_text("Live")
    fits(page, viewport)
    assert_accessible(page)


def test_a_turn_of_a_closed_thread_opens_that_thread_read_only(open_page, owner):
    group = household(owner)
    say(group, text=FOUND)
    thread = group_conversation_open(group=group)
    Conversation.objects.filter(pk=thread.pk).update(
        status=Conversation.Status.CLOSED, closed_at=timezone.now()
    )
    say(group, text="The new thread starts here.")
    page = open_page(owner, "/dashboard/")
    page.set_viewport_size(DESKTOP)
    search_from_header(page, "rhubarb")
    page.get_by_role("link", name=re.compile("rhubarb crowns")).click()
    expect(page.locator("#transcript > li.turn-found")).to_contain_text("rhubarb crowns")
    expect(page.locator("#transcript")).not_to_contain_text("The new thread starts here.")
    expect(page.get_by_text("An earlier thread of this room")).to_be_visible()
    expect(page.locator("#composer")).to_be_hidden()
    # A turn of the open thread arriving live does not replace the thread shown.
    expect(page.locator("#live")).to_have_text("Live")
    say(group, text="Live news of the open thread.")
    caught_up(page, thread, channel=f"group-{group.pk}")
    expect(page.locator("#transcript")).not_to_contain_text("Live news of the open thread.")
    assert_accessible(page)
    page.get_by_role("link", name="Back to the current thread").click()
    expect(page.locator("#transcript")).to_contain_text("Live news of the open thread.")
    expect(page.locator("#composer")).to_be_visible()


def test_a_one_to_one_turn_opens_the_agents_room_at_it(open_page, owner):
    household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    conversation = Conversation.objects.create(owner=owner, agent=ledger)
    for n in range(30):
        with transaction.atomic():
            message_append(
                conversation_id=conversation.pk,
                speaker_kind=Message.SpeakerKind.AGENT,
                speaker_agent=ledger,
                content=[text_block(FOUND if n == 3 else f"Entry {n}: " + "rent and food " * 8)],
            )
    page = open_page(owner, "/dashboard/")
    page.set_viewport_size(PHONE)
    search_from_header(page, "mulch")
    link = page.get_by_role("link", name=re.compile("Ledger"))
    expect(link).to_contain_text("rhubarb crowns")
    link.click()
    expect(page).to_have_url(
        re.compile(rf"/dashboard/agents/{ledger.pk}/room/\?conversation={conversation.pk}#turn-4$")
    )
    found = page.locator("#transcript > li.turn-found")
    expect(found).to_contain_text("rhubarb crowns")
    expect(found).to_be_in_viewport()
    expect(page.get_by_label("Message to Ledger")).to_be_visible()  # the open one: not read-only
    fits(page, PHONE)
    assert_accessible(page)
