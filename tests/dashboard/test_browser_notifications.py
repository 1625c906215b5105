"""Settings → Notifications in a browser: the page (read by axe at 1366 and 390 px), its
toggles saved and kept, the browser's permission asked only by the button, and a reply that
arrives shown as a notification — none for a muted agent.

``window.Notification`` is wrapped by an init script that records each notification made
and each permission asked for, then hands on to the browser's own: the page's code calls the
real API, and the test reads what it did."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from dashboard import consumers
from garden.models import Agent
from groups.services.requests import request_create
from notifications.models import AgentMute, NotificationSettings
from tests.conftest import wait_for
from tests.dashboard.conftest import assert_accessible, assert_controls_labelled
from tests.dashboard.helpers import household, teammate
from tests.groups.helpers import one_to_one
from tests.support.driving import finished
from tests.support.workers import worker_quiescent
from tests.telegram.conftest import bot_api  # noqa: F401  (a fixture: the local Bot API)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

URL = "/dashboard/notifications/"
DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}

RECORD_NOTIFICATIONS = """
(() => {
  window.__notices = [];
  window.__asked = 0;
  const Original = window.Notification;
  if (!Original) return;
  class Recorded extends Original {
    constructor(title, options) {
      super(title, options);
      window.__notices.push({ title, body: (options || {}).body || "" });
    }
  }
  Object.defineProperty(Recorded, "permission", { get: () => Original.permission });
  Recorded.requestPermission = (...args) => {
    window.__asked += 1;
    return Original.requestPermission(...args);
  };
  window.Notification = Recorded;
})();
"""


def notices(page) -> list[dict]:
    return page.evaluate("window.__notices")


@pytest.mark.usefixtures("bot_api")  # a site with a Telegram bot
def test_the_page_lists_each_agent_and_keeps_its_toggles(open_page, owner):
    household(owner)  # a group, which is never listed
    page = open_page(owner, URL)
    expect(page.get_by_role("heading", name="Replies")).to_be_visible()
    expect(page.get_by_label("Mute Ledger")).not_to_be_checked()
    expect(page.locator("#notify-agents")).not_to_contain_text("Household finances")
    # Approvals: said, with no control.
    expect(page.locator("#notify-approvals")).to_contain_text("cannot be muted")
    expect(page.get_by_role("checkbox", name="Approvals")).to_have_count(0)
    # No chat linked: Telegram says to link one first and cannot be turned on.
    expect(page.locator("#notify-telegram-help")).to_contain_text("Link Telegram first")
    expect(page.get_by_label("On Telegram")).to_be_disabled()
    assert_controls_labelled(page)
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        assert_accessible(page)
    page.set_viewport_size(DESKTOP)

    page.get_by_label("Mute Ledger").check()
    expect(page.locator("#notifications-saved")).to_have_text("Saved.")
    page.get_by_label("In the browser").uncheck()
    expect(page.locator("#notifications-saved")).to_have_text("Saved.")
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    assert list(AgentMute.objects.filter(owner=owner).values_list("agent_id", flat=True)) == [
        ledger.pk
    ]
    page.reload()
    expect(page.get_by_label("Mute Ledger")).to_be_checked()
    expect(page.get_by_label("Mute Concierge")).not_to_be_checked()
    expect(page.get_by_label("In the browser")).not_to_be_checked()
    assert NotificationSettings.objects.get(owner=owner).browser is False


def test_the_settings_link_is_in_the_user_menu(open_page, owner):
    page = open_page(owner, "/dashboard/tokens/")
    page.locator(".user-menu summary").click()
    page.get_by_role("link", name="Notifications").click()
    expect(page.get_by_role("heading", name="Replies")).to_be_visible()


def test_a_reply_notifies_once_allowed_and_a_muted_agents_reply_does_not(
    open_page, live_worker, owner
):
    ledger = teammate(owner, "ledger", "Ledger", rules=[{"reply": "Rent is 1,400 a month."}])
    scout = teammate(owner, "scout", "Scout", rules=[{"reply": "Found three flats."}])
    page = open_page(owner, URL)
    page.context.add_init_script(RECORD_NOTIFICATIONS)
    page.reload()
    button = page.get_by_role("button", name="Allow notifications in this browser")
    expect(button).to_be_visible()
    expect(page.locator("#notify-permission-state")).to_have_text(
        "Not allowed in this browser yet."
    )
    # Loading the page asked for nothing, and opened no socket to be notified on.
    assert page.evaluate("window.__asked") == 0
    assert consumers._open.get(owner.pk, 0) == 0

    # The person says yes to the browser's question the button asks.
    page.context.grant_permissions(["notifications"])
    button.click()
    expect(page.locator("#notify-permission-state")).to_have_text("Allowed in this browser.")
    assert page.evaluate("window.__asked") == 1
    wait_for(lambda: consumers._open.get(owner.pk, 0) == 1)

    request = one_to_one(owner, ledger, "What is the rent?")
    wait_for(finished(request), timeout=60)
    page.wait_for_function("() => window.__notices.length === 1")
    assert notices(page) == [{"title": "Ledger", "body": "Rent is 1,400 a month."}]

    page.get_by_label("Mute Ledger").check()
    expect(page.locator("#notifications-saved")).to_have_text("Saved.")
    muted = one_to_one(owner, ledger, "And the deposit?")
    wait_for(finished(muted), timeout=60)
    worker_quiescent()
    # The positive signal: a later reply on the same channel arrives; the muted one never did.
    other = one_to_one(owner, scout, "Any flats?")
    wait_for(finished(other), timeout=60)
    page.wait_for_function("() => window.__notices.length === 2")
    assert notices(page) == [
        {"title": "Ledger", "body": "Rent is 1,400 a month."},
        {"title": "Scout", "body": "Found three flats."},
    ]


def test_a_members_reply_notifies_as_the_member_on_the_roster(open_page, live_worker, owner):
    group = household(owner)
    page = open_page(owner)
    page.context.add_init_script(RECORD_NOTIFICATIONS)
    page.context.grant_permissions(["notifications"])
    page.reload()
    wait_for(lambda: consumers._open.get(owner.pk, 0) == 1)  # the roster's one socket
    request = request_create(group=group, text="Review this month's spending.")
    wait_for(finished(request), timeout=60)
    worker_quiescent()
    page.wait_for_function("() => window.__notices.length >= 2")
    titles = [n["title"] for n in notices(page)]
    assert all(t.endswith(" in Household finances") for t in titles), titles
    assert "Household finances" not in titles
    assert titles[-1] == "Concierge in Household finances"
    assert any(t.startswith("Ledger") for t in titles), titles
