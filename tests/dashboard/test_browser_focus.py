"""Focus goes where a keyboard user expects: back to the control that opened a dialog (the
menu's button for a dialog opened from the menu, + for the creation sheet), and to the
composer after Stop."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import open_room, send
from tests.dashboard.helpers import SPENDING, household, teammate

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]


def test_closing_a_dialog_opened_from_the_rooms_menu_gives_focus_to_the_menus_button(
    open_page, owner
):
    page = open_room(open_page, owner, household(owner))
    page.get_by_role("button", name="Group menu").click()
    page.get_by_role("menuitem", name="Rename…").click()
    expect(page.locator("#rename-form")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_role("button", name="Group menu")).to_be_focused()


def test_closing_the_creation_sheet_gives_focus_back_to_plus(open_page, owner):
    household(owner)
    teammate(owner, "scribe", "Scribe")
    page = open_page(owner, "/dashboard/")
    page.get_by_role("button", name="New group").click()
    sheet = page.get_by_role("dialog", name="New group")
    expect(sheet).to_be_visible()
    sheet.get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("button", name="New group")).to_be_focused()


def test_after_stop_focus_is_on_the_composer(open_page, owner, live_worker):
    page = open_room(open_page, owner, household(owner, ledger_delay=3))
    send(page, SPENDING)
    expect(page.locator("#budget .working")).to_contain_text("Ledger")
    page.get_by_role("button", name="Stop", exact=True).click()
    expect(page.locator("#budget")).to_contain_text("Stopped")
    expect(page.get_by_label("Message to the group")).to_be_focused()
