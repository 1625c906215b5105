"""The Content Security Policy in a real browser: every page of the dashboard and the admin
renders and runs its scripts with no violation (open_page fails a test on any)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.dashboard.helpers import household

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]


def test_pages_run_under_the_policy(open_page, owner, django_user_model):
    group = household(owner)
    page = open_page(owner, f"/dashboard/groups/{group.pk}/")
    expect(page.locator("#composer")).to_be_visible()
    policy = page.evaluate("""async () => (await fetch(location.href)).headers
        .get('content-security-policy')""")
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    for path in ("/dashboard/", "/dashboard/agents/"):
        page.goto(path)
        expect(page.locator("main, #content").first).to_be_visible()
    staff = django_user_model.objects.create_superuser("boss", "boss@example.com", "pw-boss-123")
    admin = open_page(staff, "/admin/garden/modelaccount/add/")
    expect(admin.locator("#id_api_key")).to_be_visible()
    admin.goto("/admin/groups/group/")
    expect(admin.locator("#content")).to_be_visible()


def test_a_request_waiting_for_the_owners_call_slot_says_so(
    open_page, owner, live_worker, settings
):
    """One owner's cap on calls in flight is a state the room shows, never an error."""
    from groups.services.requests import request_create
    from tests.groups.conftest import make_group

    settings.GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER = 1
    settings.GARDEN_CALL_SLOT_RETRY_SECONDS = 0.3
    busy = make_group(owner, name="Busy", concierge_rules=[], members={"ledger": []})
    waiting = make_group(
        owner,
        name="Waiting",
        concierge_rules=[],
        members={"advisor": []},
        concierge_default="Answered after the slot came free.",
    )
    ledger = busy.memberships.get(agent__handle="ledger").agent.model_account
    ledger.options = {**ledger.options, "delay": 4.0}
    ledger.save(update_fields=["options"])
    page = open_page(owner, f"/dashboard/groups/{waiting.pk}/")
    expect(page.locator("#live")).to_have_text("Live")
    request_create(group=busy, text="@ledger take your time.")
    page.get_by_label("Message to the group").fill("Quick question.")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#budget")).to_contain_text("Waiting for a free model slot")
    expect(page.locator("#budget")).to_contain_text("Completed", timeout=30_000)
    expect(page.locator("#transcript")).to_contain_text("Answered after the slot came free.")
