"""Controls a person taps are at least 24 x 24 px (WCAG 2.2, 2.5.8), desktop and phone, and
a field's error goes as soon as the field is changed."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from garden.models import Agent
from tests.dashboard.conftest import open_room
from tests.dashboard.helpers import artifact, household, say

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]

# Every visible control but links inside running text (exempt: they are inline).
TOO_SMALL = """() => [...document.querySelectorAll(
    "button, summary, select, input:not([type=hidden]), textarea, [role=button], [role=menuitem]")]
  .filter((el) => el.offsetParent !== null && !el.closest("[hidden]"))
  // A control drawn by its label (the file input behind Attach) is tapped through the label.
  .filter((el) => getComputedStyle(el).opacity !== "0")
  .map((el) => [el, el.getBoundingClientRect()])
  .filter(([, box]) => box.width > 0 && (box.width < 24 || box.height < 24))
  .map(([el, box]) => `${el.tagName}.${el.className} '${(el.textContent || "").trim().slice(0, 20)}' ${Math.round(box.width)}x${Math.round(box.height)}`)"""


@pytest.mark.parametrize("viewport", [(1366, 900), (390, 844)], ids=["desktop", "phone"])
def test_every_control_in_the_room_is_at_least_24_px(open_page, owner, viewport):
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    say(group, speaker=ledger, text="Net 1,050.")
    artifact(group, agent=ledger, title="Plan", content="Save 800.")
    page = open_room(open_page, owner, group)
    page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
    page.locator("#transcript .turn--agent").first.hover()
    page.get_by_role("button", name="Group menu").click()
    assert page.evaluate(TOO_SMALL) == []


def test_a_fields_error_goes_when_the_field_is_changed(open_page, owner):
    household(owner)
    page = open_page(owner, "/dashboard/agents/")
    page.get_by_label("Handle").fill("two words")
    page.get_by_label("Name", exact=True).fill("Two")
    page.get_by_role("button", name="Add agent").click()
    handle = page.get_by_label("Handle")
    expect(handle).to_have_attribute("aria-invalid", "true")
    error = page.locator('[data-error-for="handle"]')
    expect(error).to_contain_text("letters, digits")
    handle.fill("two-words")
    expect(handle).not_to_have_attribute("aria-invalid", "true")
    expect(error).to_have_text("")
