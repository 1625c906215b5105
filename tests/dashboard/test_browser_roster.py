"""The roster in a browser: the two-agent rule, adding a teammate, and the creation sheet."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from groups.models import Group
from tests.dashboard.conftest import assert_controls_labelled, tab_until
from tests.dashboard.helpers import teammate

pytestmark = [pytest.mark.browser, pytest.mark.timeout(30)]


def test_groups_appear_once_two_agents_besides_agent_father_can_run(open_page, owner):
    page = open_page(owner)
    heading = page.locator("#groups-heading")
    expect(heading).to_have_text("A group needs two agents; add a teammate.")
    expect(page.locator("#new-group")).to_have_count(0)
    assert_controls_labelled(page)

    heading.get_by_role("link").click()
    expect(page).to_have_url(re.compile(r"/dashboard/agents/$"))
    assert_controls_labelled(page)
    page.get_by_label("Name").fill("Ledger")
    page.get_by_label("Handle").fill("ledger")
    page.get_by_role("button", name="Add agent").click()
    # The new agent's page opens, to give it instructions and a model.
    expect(page.get_by_role("heading", level=1)).to_contain_text("@ledger")
    expect(page.get_by_label("Instructions")).to_be_visible()

    page.get_by_role("navigation", name="Dashboard").get_by_role("link", name="Roster").click()
    expect(heading).to_have_text("Groups")
    expect(page.get_by_role("button", name="New group")).to_be_visible()


def test_the_agents_form_shows_the_apis_errors_by_field(open_page, owner):
    page = open_page(owner, "/dashboard/agents/")
    page.get_by_label("Name").fill("Another Concierge")
    page.get_by_label("Handle").fill("concierge")
    page.get_by_role("button", name="Add agent").click()
    expect(page.locator("[data-error-for=handle]")).to_have_text("@concierge is taken.")


def test_create_a_group_from_the_sheet(open_page, owner):
    teammate(owner, "ledger", "Ledger")
    teammate(owner, "advisor", "Finance Advisor", colour="#8e44ad")
    page = open_page(owner)

    # By keyboard: Tab to +, Enter opens the sheet with the focus in its first field.
    tab_until(page, "#new-group")
    page.keyboard.press("Enter")
    sheet = page.get_by_role("dialog", name="New group")
    expect(sheet).to_be_visible()
    expect(sheet.get_by_label("Name")).to_be_focused()
    expect(sheet.locator(".memory-sentence")).to_have_text(
        "What is in the room is seen by the room."
    )
    coordinator = sheet.get_by_label("Coordinator")
    expect(coordinator.locator("option:checked")).to_have_text("Concierge (@concierge)")
    expect(sheet.get_by_role("checkbox", name=re.compile("Concierge"))).to_be_checked()
    assert_controls_labelled(page)

    # Two broken rules at once, each next to its field.
    sheet.get_by_role("checkbox", name=re.compile("Ledger")).check()
    coordinator.select_option(label="Finance Advisor (@advisor)")
    sheet.get_by_role("button", name="Create group").click()
    expect(sheet.locator("#create-name-error")).to_have_text("A group needs a name.")
    expect(sheet.get_by_label("Name")).to_have_attribute("aria-invalid", "true")
    expect(sheet.locator("#create-coordinator-error")).to_have_text(
        "The coordinator must be one of the members."
    )
    assert Group.objects.count() == 0

    sheet.get_by_label("Name").fill("Household finances")
    sheet.get_by_role("checkbox", name=re.compile("Finance Advisor")).check()
    sheet.get_by_role("button", name="Create group").click()
    expect(page).to_have_url(re.compile(r"/dashboard/groups/\d+/$"))
    group = Group.objects.get()
    assert page.url.endswith(f"/dashboard/groups/{group.pk}/")
    expect(page.locator("#group-name")).to_have_text("Household finances")
    expect(page.locator("#room-faces [role=img]")).to_have_attribute(
        "aria-label", "Members: Concierge, Ledger, Finance Advisor"
    )
    assert group.coordinator.handle == "advisor"

    page.get_by_role("navigation", name="Dashboard").get_by_role("link", name="Roster").click()
    entry = page.locator("#group-list").get_by_role("link", name=re.compile("Household finances"))
    expect(entry).to_be_visible()
    expect(entry.locator(".face")).to_have_count(3)


def test_an_empty_roster_creates_the_household_finances_team_in_one_click(open_page, owner):
    page = open_page(owner)
    assert_controls_labelled(page)
    page.get_by_role("button", name="Create the Household finances team").click()
    expect(page).to_have_url(re.compile(r"/dashboard/groups/\d+/$"))
    expect(page.locator("#live")).to_have_text("Live")
    group = Group.objects.get(owner=owner)
    assert group.name == "Household finances" and group.coordinator.handle == "concierge"
    assert [m.agent.handle for m in group.memberships.order_by("position")] == [
        "concierge",
        "ledger",
        "advisor",
    ]
    # A roster with a group offers it no more.
    page.goto("/dashboard/")
    expect(page.get_by_role("button", name="Create the Household finances team")).to_have_count(0)


def test_the_creation_sheets_advanced_section_sets_the_room_cap(open_page, owner):
    teammate(owner, "ledger", "Ledger")
    teammate(owner, "advisor", "Finance Advisor", colour="#8e44ad")
    page = open_page(owner)
    page.get_by_role("button", name="New group").click()
    sheet = page.get_by_role("dialog", name="New group")
    sheet.get_by_label("Name").fill("Small room")
    sheet.get_by_role("checkbox", name="Ledger").check()
    sheet.get_by_role("checkbox", name="Finance Advisor").check()
    sheet.get_by_text("Advanced").click()
    cap = sheet.get_by_label("Room cap (characters)")
    expect(cap).to_have_value("24000")
    cap.fill("2000")
    sheet.get_by_role("button", name="Create group").click()
    expect(sheet.locator("#create-room-cap-error")).to_have_text(
        "A room cap is at least 4,000 characters."
    )
    assert not Group.objects.filter(owner=owner).exists()
    cap.fill("8000")
    sheet.get_by_role("button", name="Create group").click()
    expect(page).to_have_url(re.compile(r"/dashboard/groups/\d+/$"))
    assert Group.objects.get(owner=owner).room_cap_chars == 8_000
