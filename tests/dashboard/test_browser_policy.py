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
    expect(page.locator("#composer, form").first).to_be_visible()
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
