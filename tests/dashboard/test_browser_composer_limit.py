"""The composer counts towards the message limit as the person types: the count shows near the
limit, past it the count is marked, Send waits and a sentence says why, and nothing is posted;
back under it, Send works again. The skip link, first in the room's tab order, lands in the
message box."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from groups.models import GroupRequest
from tests.dashboard.conftest import assert_accessible, open_room
from tests.dashboard.helpers import household

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]

WIDTHS = [1366, 390]


@pytest.mark.parametrize("width", WIDTHS)
def test_the_count_shows_near_the_limit_and_send_waits_past_it(open_page, owner, width):
    group = household(owner)
    page = open_room(open_page, owner, group)
    page.set_viewport_size({"width": width, "height": 844})
    box = page.get_by_label("Message to the group")
    send = page.get_by_role("button", name="Send", exact=True)
    count = page.locator("#composer-count")

    box.fill("A short question.")
    expect(count).to_be_hidden()

    box.fill("x" * 19_800)
    expect(count).to_have_text("19,800 / 20,000 characters")
    expect(count).not_to_have_class("composer-count is-over")
    expect(send).to_be_enabled()

    box.fill("y" * 276_000)
    expect(count).to_have_text("276,000 / 20,000 characters: 256,000 over the limit")
    expect(count).to_have_class("composer-count is-over")
    expect(send).to_be_disabled()
    expect(page.locator("#composer-limit")).to_have_text(
        "Too long to send: a message can be at most 20,000 characters. "
        "Shorten it, or attach the text as a file."
    )
    expect(box).to_have_attribute("aria-invalid", "true")
    assert_accessible(page)
    box.press("Enter")  # Enter sends only what may be sent
    expect(count).to_be_visible()
    assert GroupRequest.objects.filter(group=group).count() == 0

    box.fill("Back to a short question.")
    expect(count).to_be_hidden()
    expect(page.locator("#composer-limit")).to_be_empty()
    expect(send).to_be_enabled()
    send.click()
    expect(page.locator("#transcript .turn--owner")).to_contain_text("Back to a short question.")
    assert GroupRequest.objects.filter(group=group).count() == 1


@pytest.mark.parametrize("width", WIDTHS)
def test_the_skip_link_is_the_first_tab_stop_and_lands_in_the_message_box(open_page, owner, width):
    group = household(owner)
    page = open_room(open_page, owner, group)
    page.set_viewport_size({"width": width, "height": 844})
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to message box")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    assert_accessible(page)
    page.keyboard.press("Enter")
    expect(page.get_by_label("Message to the group")).to_be_focused()
    assert page.url.endswith(f"/dashboard/groups/{group.pk}/")  # no fragment left behind
