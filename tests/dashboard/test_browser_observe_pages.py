"""The Webhooks and Usage pages in a browser: a webhook added on the page shows its signing
secret once and is listed (never with its secret) after a reload; both pages read well to axe
at a desktop width and fit a phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from groups.models import WebhookEndpoint
from tests.dashboard.conftest import assert_accessible, assert_controls_labelled

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}


def fits(page, viewport: dict) -> None:
    page.set_viewport_size(viewport)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= viewport["width"], f"the page is {width} px wide at {viewport['width']} px"


@pytest.fixture
def loopback_webhooks(settings) -> None:
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]


def test_a_webhook_is_added_on_the_page_and_its_secret_shown_once(
    open_page, owner, loopback_webhooks
):
    page = open_page(owner, "/dashboard/webhooks/")
    page.set_viewport_size(DESKTOP)
    form = page.locator("#webhook-form")
    form.get_by_label("URL", exact=True).fill("http://127.0.0.1:9/hooks")
    form.get_by_label("Description").fill("Build bot")
    form.get_by_role("button", name="Add webhook").click()

    shown = page.locator("#webhook-secret-value")
    expect(shown).to_be_visible()
    secret = shown.input_value()
    assert secret.startswith("whsec_")
    (endpoint,) = WebhookEndpoint.objects.filter(owner=owner)
    assert endpoint.url == "http://127.0.0.1:9/hooks" and secret not in endpoint.secret_encrypted
    assert_accessible(page)
    assert_controls_labelled(page)

    page.reload()
    expect(page.locator(f"#webhook-{endpoint.pk}")).to_contain_text("127.0.0.1:9/hooks")
    expect(page.locator("#webhook-secret")).to_be_hidden()
    assert secret not in page.content(), "the secret is shown once"
    fits(page, DESKTOP)
    fits(page, PHONE)
    assert_accessible(page)


def test_the_usage_page_reads_well_at_both_widths(open_page, owner):
    page = open_page(owner, "/dashboard/usage/")
    for viewport in (DESKTOP, PHONE):
        fits(page, viewport)
        assert_accessible(page)
        assert_controls_labelled(page)
