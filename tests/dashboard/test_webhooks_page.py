"""The Webhooks page without a browser: the owner's endpoints with their state and latest
deliveries and attempts (never the secret), a notice for one that was disabled and why, the
form and its script; another owner's endpoints are not shown."""

from __future__ import annotations

import pytest
from django.utils import timezone

from groups.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from groups.services.webhooks import webhook_endpoint_create
from tests.conftest import CsrfClient

pytestmark = pytest.mark.django_db


def session(user) -> CsrfClient:
    from rest_framework.test import APIClient

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    return CsrfClient(client)


@pytest.fixture(autouse=True)
def _loopback_receivers(settings):
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]


def test_the_page_lists_endpoints_deliveries_and_attempts_never_a_secret(owner, stranger):
    created = webhook_endpoint_create(
        owner=owner,
        url="http://127.0.0.1:9/mine",
        events=["request.completed"],
        description="Nightly CI",
    )
    webhook_endpoint_create(
        owner=stranger, url="http://127.0.0.1:9/theirs", events=["request.failed"]
    )
    delivery = WebhookDelivery.objects.create(
        endpoint=created.endpoint,
        event_id="msg_abc",
        event_type="request.completed",
        payload={},
        state="delivered",
        attempts=2,
        finished_at=timezone.now(),
    )
    WebhookAttempt.objects.create(delivery=delivery, number=1, status=500, error="HTTP 500")
    WebhookAttempt.objects.create(delivery=delivery, number=2, status=200)

    html = session(owner).get("/dashboard/webhooks/").content.decode()
    assert 'href="/dashboard/webhooks/"' in html  # the user menu's link
    assert "http://127.0.0.1:9/mine" in html and "Nightly CI" in html
    assert "/theirs" not in html
    assert "request.completed" in html and "Delivered" in html
    assert "#1" in html and "HTTP 500" in html and "#2" in html and "HTTP 200" in html
    assert created.secret not in html and created.endpoint.secret_encrypted not in html
    assert 'id="webhook-form"' in html and "dashboard/webhooks.js" in html
    assert "Webhook disabled" not in html


def test_a_disabled_endpoint_is_told_with_its_reason(owner):
    endpoint = webhook_endpoint_create(
        owner=owner, url="http://127.0.0.1:9/gone", events=["request.failed"]
    ).endpoint
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        enabled=False,
        disabled_reason="5 deliveries in a row gave up (last: HTTP 500).",
        disabled_at=timezone.now(),
    )
    html = session(owner).get("/dashboard/webhooks/").content.decode()
    assert f'id="webhook-notice-{endpoint.pk}"' in html
    assert "5 deliveries in a row gave up (last: HTTP 500)." in html
    assert "js-enable" in html


def test_the_page_needs_a_sign_in(client):
    response = client.get("/dashboard/webhooks/")
    assert response.status_code == 302 and "login" in response["Location"]
