"""The room counts the messages waiting behind the running request live, as they are posted
and as each starts — not only after a reload."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from groups.services.requests import request_create
from tests.dashboard.conftest import open_room, send
from tests.dashboard.helpers import SPENDING, household

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]


def test_the_waiting_count_follows_posts_and_starts_live(open_page, owner, live_worker):
    group = household(owner, ledger_delay=2)
    page = open_room(open_page, owner, group)
    send(page, SPENDING)
    budget = page.locator("#budget")
    expect(budget.locator(".working")).to_contain_text("Ledger")
    # Posted elsewhere (another tab, a script): the count still follows.
    request_create(group=group, text="@ledger one more thing")
    request_create(group=group, text="@ledger and another")
    expect(budget).to_contain_text("· 2 more waiting")
    expect(budget).to_contain_text("· 1 more waiting", timeout=30_000)
    expect(budget).not_to_contain_text("more waiting", timeout=30_000)


def test_a_request_a_member_could_not_answer_says_so_at_its_end_with_its_settings(
    open_page, owner, live_worker, loopback_providers, settings
):
    from garden.models import Agent
    from tests.garden.providers.httpserver import unused_port
    from tests.groups.helpers import on_server

    settings.GARDEN_PROVIDER_RETRY_ATTEMPTS = 1
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    on_server(owner, ledger, type("Down", (), {"url": f"http://127.0.0.1:{unused_port()}"}))
    page = open_room(open_page, owner, group)
    send(page, SPENDING)
    budget = page.locator("#budget")
    expect(budget).to_contain_text("Completed without Ledger", timeout=30_000)
    link = budget.get_by_role("link", name="Ledger's settings")
    expect(link).to_have_attribute("href", f"/dashboard/agents/{ledger.pk}/")
    expect(page.locator("#transcript .notice", has_text="PROVIDER_UNREACHABLE")).to_be_visible()
