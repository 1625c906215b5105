"""The Members editor and a member removed from garden: its row keeps a ticked box, so a save
that changes only the coordinator keeps it, and unticking it is how the owner takes it out."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from garden.models import Agent
from garden.services.agents import agent_remove
from tests.dashboard.conftest import assert_accessible, open_room
from tests.dashboard.helpers import household

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]


def member_handles(group) -> list[str]:
    return list(group.memberships.order_by("position").values_list("agent__handle", flat=True))


def open_members_editor(page):
    page.get_by_role("button", name="Group menu").click()
    page.get_by_role("menuitem", name="Members").click()
    dialog = page.get_by_role("dialog", name="Members")
    # The editor's part stays open between openings of the sheet.
    if not dialog.locator("details.members-edit").evaluate("details => details.open"):
        dialog.get_by_text("Change members or coordinator").click()
    return dialog


@pytest.mark.parametrize("width", [1366, 390])
def test_a_removed_member_stays_through_a_save_until_the_owner_unticks_it(open_page, owner, width):
    group = household(owner)
    agent_remove(agent=Agent.objects.get(owner=owner, handle="advisor"))
    page = open_room(open_page, owner, group)
    page.set_viewport_size({"width": width, "height": 844})

    dialog = open_members_editor(page)
    removed = dialog.get_by_role("checkbox", name="Finance Advisor (removed)")
    expect(removed).to_be_checked()
    assert_accessible(page)
    dialog.get_by_label("Coordinator").select_option(label="Ledger (@ledger)")
    dialog.get_by_role("button", name="Save members").click()
    expect(dialog).to_be_hidden()
    group.refresh_from_db()
    assert group.coordinator.handle == "ledger"
    assert member_handles(group) == ["concierge", "ledger", "advisor"]

    dialog = open_members_editor(page)
    removed = dialog.get_by_role("checkbox", name="Finance Advisor (removed)")
    expect(removed).to_have_count(1)  # opened again, the row is not offered twice
    removed.uncheck()
    dialog.get_by_role("button", name="Save members").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#room-faces [role=img]")).to_have_attribute(
        "aria-label", "Members: Concierge, Ledger"
    )
    assert member_handles(group) == ["concierge", "ledger"]

    # Gone from the group, it is no longer offered at all.
    dialog = open_members_editor(page)
    expect(dialog.get_by_role("checkbox", name="Finance Advisor (removed)")).to_have_count(0)
