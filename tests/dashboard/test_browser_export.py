"""Export in a browser, at 1366 px and at 390 px: the ⋯ menu of a group's room and of an
agent's room opens Export history with its two downloads (Markdown, JSON), which download the
room's history with the page's session; Clear history offers the same downloads before its
button, and cancelling it clears nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from garden.models import Agent, Conversation, Message
from garden.services.conversations import message_append, text_block
from tests.dashboard.conftest import (
    assert_accessible,
    assert_controls_labelled,
    open_room,
    tab_until,
)
from tests.dashboard.helpers import household, say
from tests.groups.helpers import writer

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]

VIEWPORTS = [
    pytest.param({"width": 1366, "height": 768}, id="1366px"),
    pytest.param({"width": 390, "height": 844}, id="390px"),
]
LINKS = (("Download as Markdown", "markdown"), ("Download as JSON", "json"))


def assert_on_screen(page, locator) -> None:
    """``locator`` is visible and wholly inside the viewport's width; the page is no wider."""
    width = page.viewport_size["width"]
    expect(locator).to_be_in_viewport()
    box = locator.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width, box
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def downloaded(page, link) -> str:
    with page.expect_download() as download:
        link.click()
    return Path(download.value.path()).read_text()


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_a_groups_menu_exports_its_history_and_clear_history_offers_it_first(
    open_page, owner, viewport
):
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    say(group, text="What did we spend on groceries?")
    say(group, text="520 this month.", speaker=ledger)
    page = open_room(open_page, owner, group)
    page.set_viewport_size(viewport)
    menu_button = page.get_by_role("button", name="Group menu")
    menu_button.click()
    items = page.get_by_role("menu").get_by_role("menuitem")
    expect(items).to_have_text(["Members", "Rename…", "Export…", "Clear history…", "Delete group…"])
    items.get_by_text("Export…").click()

    dialog = page.get_by_role("dialog", name="Export history")
    expect(dialog).to_contain_text("Every conversation of this group")
    for name, fmt in LINKS:
        link = dialog.get_by_role("link", name=name)
        expect(link).to_have_attribute("href", f"/api/groups/{group.pk}/export?format={fmt}")
        assert_on_screen(page, link)
    assert_controls_labelled(page)
    assert_accessible(page)
    markdown = downloaded(page, dialog.get_by_role("link", name="Download as Markdown"))
    assert markdown.startswith("# Household finances")
    assert "**Ledger** (@ledger)" in markdown and "520 this month." in markdown
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()
    expect(menu_button).to_be_focused()

    menu_button.click()
    page.get_by_role("menuitem", name="Clear history…").click()
    clear = page.get_by_role("dialog", name="Clear history?")
    expect(clear.get_by_role("link")).to_have_text([name for name, _ in LINKS])
    button = clear.get_by_role("button", name="Clear history")
    # Offered first: the downloads come before the button that clears.
    for name, _ in LINKS:
        link = clear.get_by_role("link", name=name)
        assert_on_screen(page, link)
        assert link.bounding_box()["y"] < button.bounding_box()["y"]
    assert_accessible(page)
    document = json.loads(downloaded(page, clear.get_by_role("link", name="Download as JSON")))
    texts = [t["text"] for c in document["conversations"] for t in c["turns"]]
    assert texts == ["What did we spend on groceries?", "520 this month."]
    clear.get_by_role("button", name="Cancel").click()
    expect(clear).to_be_hidden()
    assert Message.objects.filter(conversation__group=group).count() == 2


@pytest.mark.parametrize("viewport", VIEWPORTS)
def test_an_agents_room_menu_exports_its_conversation(open_page, owner, viewport):
    scribe = writer(owner, handle="scribe")
    page = open_page(owner, f"/dashboard/agents/{scribe.pk}/room/")
    page.set_viewport_size(viewport)
    expect(page.locator("#live")).to_have_text("Live")
    conversation = Conversation.objects.get(owner=owner, agent=scribe)
    message_append(
        conversation_id=conversation.pk,
        speaker_kind=Message.SpeakerKind.AGENT,
        speaker_agent=scribe,
        content=[text_block("Hello from Scribe.")],
    )
    expect(page.get_by_role("link", name="Scribe's settings")).to_be_visible()
    tab_until(page, "#menu-button")
    expect(page.get_by_role("button", name="Conversation menu")).to_be_focused()
    page.keyboard.press("Enter")
    items = page.get_by_role("menu").get_by_role("menuitem")
    expect(items).to_have_text(["Export…"])
    expect(items.first).to_be_focused()
    page.keyboard.press("Enter")

    dialog = page.get_by_role("dialog", name="Export history")
    expect(dialog).to_contain_text("This conversation with Scribe")
    for name, fmt in LINKS:
        link = dialog.get_by_role("link", name=name)
        expect(link).to_have_attribute(
            "href", f"/api/conversations/{conversation.pk}/export?format={fmt}"
        )
        assert_on_screen(page, link)
    assert_controls_labelled(page)
    assert_accessible(page)
    document = json.loads(downloaded(page, dialog.get_by_role("link", name="Download as JSON")))
    assert document["scope"] == "conversation"
    assert [t["text"] for t in document["conversations"][0]["turns"]] == ["Hello from Scribe."]
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(page.get_by_role("button", name="Conversation menu")).to_be_focused()
