"""The documents page: the owner's documents (a cleared group's too, as "no conversation")
with their storage against the limit, never another owner's; Delete in a real browser, with
axe finding nothing serious."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from django.utils.formats import date_format
from playwright.sync_api import expect

from garden.models import Agent, Artifact
from groups.services.groups import group_clear
from tests.dashboard.conftest import assert_accessible, assert_controls_labelled
from tests.dashboard.helpers import artifact, household


@pytest.mark.django_db
def test_the_page_lists_the_owners_documents_and_usage_only(signed_in, owner, stranger, settings):
    settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER = 10 * 1024 * 1024
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    budget = artifact(group, agent=ledger, title="Budget", content="rent 900\n" * 100)
    Artifact.objects.create(owner=stranger, title="Their secret plan", size=10)
    group_clear(group=group)
    html = signed_in.get("/dashboard/documents/").content.decode()
    assert "Budget" in html and "@ledger" in html and "no conversation" in html
    assert "Their secret plan" not in html
    # When it was made, as every page writes dates, and the moment itself for machines.
    made = timezone.localtime(budget.created_at)
    assert f'<time datetime="{made.isoformat()}">{date_format(made, "j M Y, H:i")}</time>' in html
    assert "of 10.0\xa0MB used" in html and 'max="10485760"' in html
    assert 'href="/dashboard/documents/"' in signed_in.get("/dashboard/").content.decode()


@pytest.mark.browser
@pytest.mark.timeout(60)
def test_delete_a_document_from_the_page(open_page, owner):
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    budget = artifact(group, agent=ledger, title="Budget", content="rent 900\n" * 100)
    artifact(group, agent=ledger, title="Chart", content="x" * 10)
    page = open_page(owner, "/dashboard/documents/")
    assert_controls_labelled(page)
    made = page.locator(f"#document-{budget.pk} time")
    expect(made).to_have_text(re.compile(r"\d{1,2} [A-Z][a-z]{2,3} \d{4}, \d{2}:\d{2}"))
    for viewport in ({"width": 1366, "height": 900}, {"width": 390, "height": 844}):
        page.set_viewport_size(viewport)
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        assert_accessible(page)
    expect(page.locator("#storage-usage")).to_contain_text("used")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete Budget").click()
    expect(page.locator(f"#document-{budget.pk}")).to_have_count(0)
    expect(page.get_by_role("status")).to_have_text("Deleted Budget.")
    expect(page.get_by_role("button", name="Delete Chart")).to_be_focused()
    expect(page.locator(".js-part-artifacts")).to_have_text("10 bytes")
    assert not Artifact.objects.filter(pk=budget.pk).exists()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete Chart").click()
    expect(page.locator("#documents-empty")).to_be_visible()
    expect(page.locator(".js-part-artifacts")).to_have_text("0 bytes")
