"""Webhooks to a real local HTTP server: deliveries signed per the Standard Webhooks spec
(verified here with the spec's algorithm, not the library), one per event and endpoint, a 500
retried, private addresses refused when saved and when sent, another owner's group never
delivered, endpoints that keep failing disabled, named-only endpoints, quotas and the API."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from garden.errors import ServiceError
from garden.models import Agent
from groups.models import (
    Approval,
    Group,
    GroupRequest,
    Membership,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from groups.services.requests import request_create, request_stop_active
from groups.services.webhook_sending import (
    webhook_delivery_attempt,
    webhook_delivery_purge,
    webhook_delivery_sweep,
)
from groups.services.webhooks import webhook_endpoint_create, webhook_endpoint_rotate_secret
from tests.conftest import _wait_until_worker_idle, wait_for
from tests.groups.conftest import make_group
from tests.support.driving import drive

ALL_EVENTS = ["request.completed", "request.stopped", "request.failed", "approval.pending"]


class Receiver:
    """A webhook receiver on 127.0.0.1: records every POST (headers, body) and answers with
    the next status of ``statuses`` (200 once they run out)."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], str]] = []
        self.statuses: list[int] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0))).decode()
                with outer.lock:
                    outer.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                    status = outer.statuses.pop(0) if outer.statuses else 200
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def bodies(self) -> list[dict]:
        with self.lock:
            return [json.loads(b) for _h, b in self.received]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(settings):
    """The operator allows webhooks to 127.0.0.1 (GARDEN_EGRESS_ALLOW_WEBHOOK), as for a
    receiver on the private network."""
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    server = Receiver()
    yield server
    server.close()


def spec_verifies(secret: str, headers: dict[str, str], body: str) -> bool:
    """The Standard Webhooks check, written out: HMAC-SHA256 over ``id.timestamp.body`` with
    the base64-decoded secret after ``whsec_``; the header holds ``v1,<base64>`` entries."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.{body}".encode()
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(
        version == "v1" and hmac.compare_digest(sig, expected)
        for version, _, sig in (p.partition(",") for p in headers["webhook-signature"].split())
    )


def quick_group(owner, name: str = "Team"):
    """A group whose coordinator concludes at once: a request completes in one call."""
    concierge = Agent.objects.filter(owner=owner, builtin=Agent.Builtin.CONCIERGE).first()
    if concierge is None or concierge.model_account_id is None:
        return make_group(owner, concierge_rules=[], members={}, name=name)
    group = Group.objects.create(owner=owner, name=name, coordinator=concierge)
    Membership.objects.create(group=group, agent=concierge, position=0)
    return group


def delivered(delivery_id: int):
    def check():
        d = WebhookDelivery.objects.get(pk=delivery_id)
        return d if d.state != WebhookDelivery.State.PENDING else None

    return check


# --- delivered by a real worker ---------------------------------------------------------------


def test_a_completed_request_is_delivered_once_signed_and_another_owners_never(
    celery_worker_thread, receiver, owner, stranger
):
    created = webhook_endpoint_create(owner=owner, url=receiver.url, events=ALL_EVENTS)
    theirs = request_create(group=quick_group(stranger, "Theirs"), text="hello")
    mine = request_create(group=quick_group(owner), text="hello")
    delivery = wait_for(lambda: WebhookDelivery.objects.filter(request=mine).first(), timeout=30)
    done = wait_for(delivered(delivery.pk), timeout=30)
    wait_for(lambda: GroupRequest.objects.get(pk=theirs.pk).is_finished, timeout=30)
    _wait_until_worker_idle()

    assert done.state == "delivered" and done.attempts == 1 and done.last_status == 200
    assert len(receiver.received) == 1
    headers, body = receiver.received[0]
    assert spec_verifies(created.secret, headers, body)
    assert not spec_verifies("whsec_" + base64.b64encode(b"x" * 32).decode(), headers, body)
    assert headers["webhook-id"] == done.event_id
    assert headers["content-type"] == "application/json"
    event = json.loads(body)
    assert event["type"] == "request.completed"
    assert event["data"]["request"]["id"] == mine.pk
    assert event["data"]["request"]["state"] == "completed"
    assert event["data"]["group"] == mine.group_id
    assert event["data"]["conversation"] == mine.conversation_id
    # The stranger's request ended too, and this owner's all-groups endpoint heard nothing.
    assert GroupRequest.objects.get(pk=theirs.pk).state == "completed"
    assert WebhookDelivery.objects.count() == 1
    assert [b["data"]["request"]["id"] for b in receiver.bodies()] == [mine.pk]


def test_a_500_is_retried_with_the_same_id_and_then_delivered(
    celery_worker_thread, receiver, owner, settings
):
    settings.GARDEN_WEBHOOK_BACKOFF = [0.2]
    receiver.statuses = [500]
    created = webhook_endpoint_create(owner=owner, url=receiver.url, events=["request.completed"])
    request = request_create(group=quick_group(owner), text="hello")
    delivery = wait_for(lambda: WebhookDelivery.objects.filter(request=request).first(), timeout=30)
    done = wait_for(delivered(delivery.pk), timeout=30)
    _wait_until_worker_idle()

    assert done.state == "delivered" and done.attempts == 2
    attempts = list(WebhookAttempt.objects.filter(delivery=done).values_list("number", "status"))
    assert attempts == [(1, 500), (2, 200)]
    assert len(receiver.received) == 2
    assert {h["webhook-id"] for h, _ in receiver.received} == {done.event_id}
    assert all(spec_verifies(created.secret, h, b) for h, b in receiver.received)
    endpoint = WebhookEndpoint.objects.get(pk=created.endpoint.pk)
    assert endpoint.consecutive_failures == 0 and endpoint.enabled


def test_the_sweep_sends_a_delivery_whose_try_was_lost(celery_worker_thread, receiver, owner):
    endpoint = webhook_endpoint_create(owner=owner, url=receiver.url, events=ALL_EVENTS).endpoint
    # Its first try's message was lost with a worker: nothing was sent for five minutes.
    stranded = WebhookDelivery.objects.create(
        endpoint=endpoint,
        event_id="msg_lost",
        event_type="request.completed",
        payload={"type": "request.completed", "timestamp": "t", "data": {}},
        next_attempt_at=timezone.now() - timedelta(minutes=5),
    )
    assert webhook_delivery_sweep() == 1
    done = wait_for(delivered(stranded.pk), timeout=30)
    assert done.state == "delivered"
    assert [h["webhook-id"] for h, _ in receiver.received] == ["msg_lost"]


# --- the egress policy: at save and at send --------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://127.0.0.1:9/hook",
        "http://[::1]/hook",
        "http://localhost/hook",
    ],
)
def test_a_private_address_is_refused_at_save(owner, url):
    with pytest.raises(ServiceError) as refused:
        webhook_endpoint_create(owner=owner, url=url, events=ALL_EVENTS)
    assert refused.value.code == "EGRESS_REFUSED" and refused.value.field == "url"
    assert "GARDEN_EGRESS_ALLOW_WEBHOOK" in refused.value.message
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.django_db
def test_the_api_refuses_a_metadata_address_and_stores_nothing(api):
    response = api.post(
        "/api/webhooks",
        {"url": "http://169.254.169.254/hook", "events": ["request.completed"]},
    )
    assert response.status_code == 400
    assert response.json()["code"] == "EGRESS_REFUSED"
    assert not WebhookEndpoint.objects.exists()


def _pending(endpoint: WebhookEndpoint, event_id: str = "msg_1") -> WebhookDelivery:
    return WebhookDelivery.objects.create(
        endpoint=endpoint,
        event_id=event_id,
        event_type="request.completed",
        payload={"type": "request.completed", "timestamp": "t", "data": {}},
        next_attempt_at=timezone.now(),
    )


@pytest.mark.django_db(transaction=True)
def test_a_private_address_written_past_the_check_is_refused_at_send(receiver, owner):
    endpoint = webhook_endpoint_create(owner=owner, url=receiver.url, events=ALL_EVENTS).endpoint
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(url="http://10.0.0.1/hook")
    delivery = _pending(endpoint)

    assert webhook_delivery_attempt(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert delivery.state == "failed" and delivery.last_status is None
    assert delivery.last_error.startswith("EGRESS_REFUSED")
    (attempt,) = WebhookAttempt.objects.filter(delivery=delivery)
    assert attempt.status is None and "GARDEN_EGRESS_ALLOW_WEBHOOK" in attempt.error


@pytest.mark.django_db(transaction=True)
def test_a_refusal_never_shows_the_address_a_name_resolves_to(api, owner, monkeypatch):
    """What an internal name resolves to is not the owner's to learn, at save or at send."""
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host == "hooks.corp.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.11.12.13", port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    refused = api.post(
        "/api/webhooks", {"url": "http://hooks.corp.test/h", "events": ["request.completed"]}
    )
    assert refused.status_code == 400 and refused.json()["code"] == "EGRESS_REFUSED"
    assert "10.11.12.13" not in refused.content.decode()
    assert "GARDEN_EGRESS_ALLOW_WEBHOOK" in refused.json()["message"]
    assert not WebhookEndpoint.objects.exists()

    endpoint = webhook_endpoint_create(
        owner=owner, url="http://other.corp.test/h", events=ALL_EVENTS
    ).endpoint  # it does not resolve now: kept, checked again at every try
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(url="http://hooks.corp.test/h")
    delivery = _pending(endpoint)
    assert webhook_delivery_attempt(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    (attempt,) = WebhookAttempt.objects.filter(delivery=delivery)
    assert delivery.last_error.startswith("EGRESS_REFUSED")
    assert "10.11.12.13" not in delivery.last_error and "10.11.12.13" not in attempt.error
    listed = api.get(f"/api/webhooks/{endpoint.pk}/deliveries").content.decode()
    assert "10.11.12.13" not in listed


@pytest.mark.django_db(transaction=True)
def test_an_allowance_taken_away_after_save_is_refused_at_send(receiver, owner, settings):
    endpoint = webhook_endpoint_create(owner=owner, url=receiver.url, events=ALL_EVENTS).endpoint
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = []
    delivery = _pending(endpoint)

    assert webhook_delivery_attempt(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert "loopback" in delivery.last_error
    # The try ran to its end in this thread: the receiver was never connected to.
    assert receiver.received == []


# --- failing endpoints ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_endpoint_whose_deliveries_keep_giving_up_is_disabled(receiver, owner, settings):
    settings.GARDEN_WEBHOOK_MAX_ATTEMPTS = 1
    settings.GARDEN_WEBHOOK_DISABLE_AFTER = 2
    receiver.statuses = [500, 500, 500]
    endpoint = webhook_endpoint_create(owner=owner, url=receiver.url, events=ALL_EVENTS).endpoint
    for n in range(2):
        delivery = WebhookDelivery.objects.create(
            endpoint=endpoint,
            event_id=f"msg_{n}",
            event_type="request.failed",
            payload={},
            next_attempt_at=timezone.now(),
        )
        assert webhook_delivery_attempt(delivery_id=delivery.pk) == "failed"
    endpoint.refresh_from_db()
    assert not endpoint.enabled and endpoint.consecutive_failures == 2
    assert "2 deliveries in a row gave up" in endpoint.disabled_reason
    # A delivery of a disabled endpoint is given up unsent.
    late = WebhookDelivery.objects.create(
        endpoint=endpoint,
        event_id="msg_late",
        event_type="request.failed",
        payload={},
        next_attempt_at=timezone.now(),
    )
    assert webhook_delivery_attempt(delivery_id=late.pk) == "endpoint disabled"
    assert len(receiver.received) == 2


@pytest.mark.django_db(transaction=True)
def test_410_gone_disables_at_once_and_enabling_clears_it(receiver, owner, api):
    receiver.statuses = [410]
    endpoint = webhook_endpoint_create(owner=owner, url=receiver.url, events=ALL_EVENTS).endpoint
    delivery = _pending(endpoint)
    assert webhook_delivery_attempt(delivery_id=delivery.pk) == "failed"
    shown = api.get(f"/api/webhooks/{endpoint.pk}").json()
    assert shown["enabled"] is False and "410 Gone" in shown["disabled_reason"]

    enabled = api.patch(f"/api/webhooks/{endpoint.pk}", {"enabled": True}).json()
    assert enabled["enabled"] is True
    assert (enabled["disabled_reason"], enabled["consecutive_failures"]) == ("", 0)


@pytest.mark.django_db(transaction=True)
def test_a_try_that_is_not_due_or_already_done_does_nothing(receiver, owner):
    endpoint = webhook_endpoint_create(owner=owner, url=receiver.url, events=ALL_EVENTS).endpoint
    delivery = _pending(endpoint)
    assert webhook_delivery_attempt(delivery_id=delivery.pk) == "delivered"
    assert webhook_delivery_attempt(delivery_id=delivery.pk) == "not due"
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        state="pending", next_attempt_at=timezone.now() + timedelta(minutes=5)
    )
    assert webhook_delivery_attempt(delivery_id=delivery.pk) == "not due"
    assert len(receiver.received) == 1


# --- which endpoints hear which events (rows, in the ending's transaction) ----------------------


@pytest.mark.django_db
def test_named_only_endpoints_hear_only_the_requests_that_name_them(owner, settings):
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    group = quick_group(owner)
    named = webhook_endpoint_create(
        owner=owner, url="http://127.0.0.1:9/named", events=ALL_EVENTS, named_only=True
    ).endpoint
    here = webhook_endpoint_create(
        owner=owner, url="http://127.0.0.1:9/here", events=ALL_EVENTS, group=group.pk
    ).endpoint
    elsewhere = webhook_endpoint_create(
        owner=owner,
        url="http://127.0.0.1:9/elsewhere",
        events=ALL_EVENTS,
        group=quick_group(owner, "Other").pk,
    ).endpoint
    failed_only = webhook_endpoint_create(
        owner=owner, url="http://127.0.0.1:9/failed", events=["request.failed"]
    ).endpoint

    plain = request_create(group=group, text="hello")
    drive(plain)
    naming = request_create(group=group, text="hello again", webhook=named.pk)
    drive(naming)
    # Naming an endpoint that also hears the group anyway delivers once, not twice.
    twice = request_create(group=group, text="and again", webhook=here.pk)
    drive(twice)

    def heard(request):
        return sorted(
            WebhookDelivery.objects.filter(request=request).values_list("endpoint", flat=True)
        )

    assert heard(plain) == [here.pk]
    assert heard(naming) == sorted([named.pk, here.pk])
    assert heard(twice) == [here.pk]
    assert not WebhookDelivery.objects.filter(endpoint__in=[elsewhere, failed_only]).exists()
    one = WebhookDelivery.objects.filter(request=naming)
    assert len({d.event_id for d in one}) == 1 and {d.event_type for d in one} == {
        "request.completed"
    }


@pytest.mark.django_db
def test_a_message_naming_another_owners_endpoint_is_refused_and_stores_nothing(
    owner, stranger, settings
):
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    theirs = webhook_endpoint_create(
        owner=stranger, url="http://127.0.0.1:9/theirs", events=ALL_EVENTS
    ).endpoint
    group = quick_group(owner)
    with pytest.raises(ServiceError) as refused:
        request_create(group=group, text="hello", webhook=theirs.pk)
    assert refused.value.code == "WEBHOOK_NOT_FOUND" and refused.value.field == "webhook"
    assert not GroupRequest.objects.filter(group=group).exists()


@pytest.mark.django_db
def test_an_approval_that_waits_and_a_stop_are_announced(owner, settings):
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    write = {"name": "file.write", "arguments": {"title": "Plan", "content": "Save."}}
    group = make_group(
        owner,
        concierge_rules=[{"reply": {"text": "Writing.", "tool_calls": [write]}}],
        members={},
    )
    Agent.objects.filter(owner=owner, handle="concierge").update(
        enabled_tools=["file.write"], approval_tools=["file.write"]
    )
    endpoint = webhook_endpoint_create(
        owner=owner, url="http://127.0.0.1:9/hook", events=["approval.pending", "request.stopped"]
    ).endpoint
    request = request_create(group=group, text="Write the plan.")
    drive(request, "awaiting_approval")
    approval = Approval.objects.get(request=request)
    (pending,) = WebhookDelivery.objects.filter(endpoint=endpoint)
    assert pending.event_type == "approval.pending"
    assert pending.payload["type"] == "approval.pending"
    assert pending.payload["data"]["approval"]["id"] == approval.pk
    assert pending.payload["data"]["approval"]["status"] == "pending"
    assert pending.payload["data"]["request"]["id"] == request.pk

    request_stop_active(group=group)
    stopped = WebhookDelivery.objects.get(endpoint=endpoint, event_type="request.stopped")
    assert stopped.payload["data"]["request"]["state"] == "stopped"
    assert stopped.payload["data"]["request"]["outcome_code"] == "STOPPED"
    json.dumps(stopped.payload)  # stored as sent: JSON through and through


# --- API, quotas, purge ---------------------------------------------------------------------


@pytest.mark.django_db
def test_the_secret_is_shown_once_and_rotated(api, owner, settings):
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    created = api.post(
        "/api/webhooks",
        {"url": "http://127.0.0.1:9/hook", "events": ["request.completed"], "description": "CI"},
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["secret"].startswith("whsec_") and len(base64.b64decode(body["secret"][6:])) == 32
    endpoint = WebhookEndpoint.objects.get(pk=body["id"])
    assert body["secret"] not in endpoint.secret_encrypted
    assert "secret" not in api.get(f"/api/webhooks/{body['id']}").json()
    assert all("secret" not in e for e in api.get("/api/webhooks").json())

    rotated = api.post(f"/api/webhooks/{body['id']}/rotate-secret").json()
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != body["secret"]


@pytest.mark.django_db
def test_another_owners_endpoint_and_group_are_not_found(api, owner, stranger, settings):
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    theirs = webhook_endpoint_create(
        owner=stranger, url="http://127.0.0.1:9/hook", events=ALL_EVENTS
    ).endpoint
    for response in (
        api.get(f"/api/webhooks/{theirs.pk}"),
        api.patch(f"/api/webhooks/{theirs.pk}", {"enabled": False}),
        api.delete(f"/api/webhooks/{theirs.pk}"),
        api.get(f"/api/webhooks/{theirs.pk}/deliveries"),
        api.post(f"/api/webhooks/{theirs.pk}/rotate-secret"),
    ):
        assert response.status_code == 404
    their_group = quick_group(stranger, "Theirs")
    refused = api.post(
        "/api/webhooks",
        {"url": "http://127.0.0.1:9/hook", "events": ALL_EVENTS, "group": their_group.pk},
    )
    assert refused.status_code == 400 and refused.json()["code"] == "GROUP_NOT_FOUND"
    assert api.get("/api/webhooks").json() == []
    assert WebhookEndpoint.objects.get(pk=theirs.pk).enabled


@pytest.mark.django_db
def test_bad_events_are_refused_by_name(owner, settings):
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    for events in ([], ["request.eaten"], "request.completed"):
        with pytest.raises(ServiceError) as refused:
            webhook_endpoint_create(owner=owner, url="http://127.0.0.1:9/h", events=events)
        assert refused.value.code == "INVALID_EVENTS"
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.django_db
def test_an_owner_has_at_most_the_sites_number_of_endpoints(api, owner, settings):
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    settings.GARDEN_MAX_WEBHOOKS_PER_OWNER = 2
    for n in range(2):
        webhook_endpoint_create(owner=owner, url=f"http://127.0.0.1:9/{n}", events=ALL_EVENTS)
    refused = api.post("/api/webhooks", {"url": "http://127.0.0.1:9/3", "events": ALL_EVENTS})
    assert refused.status_code == 409 and refused.json()["code"] == "WEBHOOK_LIMIT"
    assert WebhookEndpoint.objects.filter(owner=owner).count() == 2


@pytest.mark.django_db
def test_deliveries_are_listed_with_their_attempts(api, owner, settings):
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    endpoint = webhook_endpoint_create(
        owner=owner, url="http://127.0.0.1:9/h", events=ALL_EVENTS
    ).endpoint
    delivery = _pending(endpoint)
    WebhookAttempt.objects.create(delivery=delivery, number=1, status=500, error="HTTP 500")
    (listed,) = api.get(f"/api/webhooks/{endpoint.pk}/deliveries").json()
    assert listed["event_id"] == "msg_1" and listed["state"] == "pending"
    assert [(a["number"], a["status"], a["error"]) for a in listed["attempt_log"]] == [
        (1, 500, "HTTP 500")
    ]


@pytest.mark.django_db
def test_old_finished_deliveries_are_purged(owner, settings):
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    endpoint = webhook_endpoint_create(
        owner=owner, url="http://127.0.0.1:9/h", events=ALL_EVENTS
    ).endpoint
    old = timezone.now() - timedelta(days=settings.GARDEN_WEBHOOK_KEEP_DAYS + 1)
    kept = []
    for n, (state, finished) in enumerate(
        [("delivered", old), ("failed", old), ("delivered", timezone.now()), ("pending", None)]
    ):
        d = WebhookDelivery.objects.create(
            endpoint=endpoint,
            event_id=f"msg_{n}",
            event_type="request.completed",
            payload={},
            state=state,
            finished_at=finished,
        )
        if finished is not old:
            kept.append(d.pk)
    webhook_delivery_purge()
    assert sorted(WebhookDelivery.objects.values_list("pk", flat=True)) == kept


@pytest.mark.django_db
def test_other_bad_input_is_refused_by_name_and_changes_nothing(api, owner, settings):
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    for url in ("ftp://127.0.0.1/h", "not a url", "http:///nohost"):
        with pytest.raises(ServiceError) as refused:
            webhook_endpoint_create(owner=owner, url=url, events=ALL_EVENTS)
        assert refused.value.code == "INVALID_URL"
    with pytest.raises(ServiceError) as refused:
        webhook_endpoint_create(
            owner=owner, url="http://127.0.0.1:9/h", events=ALL_EVENTS, description="x" * 201
        )
    assert refused.value.code == "INVALID_DESCRIPTION"
    assert not WebhookEndpoint.objects.exists()

    endpoint = webhook_endpoint_create(
        owner=owner, url="http://127.0.0.1:9/h", events=ALL_EVENTS
    ).endpoint
    moved = api.patch(f"/api/webhooks/{endpoint.pk}", {"url": "http://10.1.2.3/h"})
    assert moved.status_code == 400 and moved.json()["code"] == "EGRESS_REFUSED"
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).url == "http://127.0.0.1:9/h"

    assert api.patch(f"/api/webhooks/{endpoint.pk}", {"enabled": False}).json()["enabled"] is False
    test = api.post(f"/api/webhooks/{endpoint.pk}/test")
    assert test.status_code == 409 and test.json()["code"] == "WEBHOOK_DISABLED"
    assert not WebhookDelivery.objects.exists()


@pytest.mark.django_db
def test_a_test_event_is_a_delivery_like_any_other(api, owner, settings):
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    endpoint = webhook_endpoint_create(
        owner=owner, url="http://127.0.0.1:9/h", events=["request.failed"]
    ).endpoint
    sent = api.post(f"/api/webhooks/{endpoint.pk}/test")
    assert sent.status_code == 202
    body = sent.json()
    assert body["event_type"] == "webhook.test" and body["state"] == "pending"
    assert body["payload"]["data"] == {"endpoint": endpoint.pk}
    assert WebhookDelivery.objects.filter(endpoint=endpoint).count() == 1


# --- an owner's share of the workers ----------------------------------------------------------


def test_an_owner_at_its_cap_of_tries_waits_unsent_and_another_owners_go_out(
    celery_worker_thread, receiver, owner, stranger, settings
):
    from garden.slots import WEBHOOKS, slot_hold
    from groups.tasks import deliver_webhook

    settings.GARDEN_MAX_WEBHOOKS_IN_FLIGHT_PER_OWNER = 1
    settings.GARDEN_CALL_SLOT_RETRY_SECONDS = 0.1
    settings.GARDEN_SLOT_RETRY_MAX_SECONDS = 0.3
    mine = _pending(
        webhook_endpoint_create(owner=owner, url=receiver.url, events=ALL_EVENTS).endpoint,
        "msg_mine",
    )
    theirs = _pending(
        webhook_endpoint_create(owner=stranger, url=receiver.url, events=ALL_EVENTS).endpoint,
        "msg_theirs",
    )
    held = slot_hold(owner_id=owner.pk, kind=WEBHOOKS)  # another of this owner's tries
    assert held is not None
    try:
        assert deliver_webhook(mine.pk) == "waiting for a slot"
        assert deliver_webhook(theirs.pk) == "delivered"
        mine.refresh_from_db()
        assert (mine.state, mine.attempts, mine.last_error) == ("pending", 0, "")
        assert not WebhookAttempt.objects.filter(delivery=mine).exists()
        assert [h["webhook-id"] for h, _ in receiver.received] == ["msg_theirs"]
    finally:
        held.release()
    # It sent itself again: once the slot is free, that message delivers it (no sweep runs).
    done = wait_for(delivered(mine.pk), timeout=30)
    assert done.state == "delivered" and done.attempts == 1
    assert sorted(h["webhook-id"] for h, _ in receiver.received) == ["msg_mine", "msg_theirs"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("pause", [float("nan"), float("inf"), 1e20, -5.0])
def test_a_nonsensical_back_off_still_records_the_try(receiver, owner, settings, pause):
    settings.GARDEN_WEBHOOK_BACKOFF = [pause]
    receiver.statuses = [500]
    delivery = _pending(
        webhook_endpoint_create(owner=owner, url=receiver.url, events=ALL_EVENTS).endpoint
    )
    webhook_delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert delivery.attempts == 1 and delivery.last_status == 500
    assert WebhookAttempt.objects.filter(delivery=delivery).count() == 1
    if delivery.state == "pending":
        assert delivery.next_attempt_at <= timezone.now() + timedelta(days=1)


# --- the site's keys --------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_rotating_the_sites_keys_keeps_every_webhook_signing(receiver, owner, settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.GARDEN_FERNET_KEYS = [old]
    created = webhook_endpoint_create(owner=owner, url=receiver.url, events=ALL_EVENTS)
    settings.GARDEN_FERNET_KEYS = [new, old]
    call_command("rotate_api_keys", stdout=StringIO())
    settings.GARDEN_FERNET_KEYS = [new]  # the old key dropped

    delivery = _pending(created.endpoint)
    assert webhook_delivery_attempt(delivery_id=delivery.pk) == "delivered"
    ((headers, body),) = receiver.received
    assert spec_verifies(created.secret, headers, body)


@pytest.mark.django_db(transaction=True)
def test_a_secret_no_key_reads_gives_the_delivery_up_unsent_saying_so(receiver, owner, settings):
    settings.GARDEN_FERNET_KEYS = [Fernet.generate_key().decode()]
    endpoint = webhook_endpoint_create(owner=owner, url=receiver.url, events=ALL_EVENTS).endpoint
    settings.GARDEN_FERNET_KEYS = [Fernet.generate_key().decode()]  # replaced, not rotated
    delivery = _pending(endpoint)
    assert webhook_delivery_attempt(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert delivery.last_error.startswith("KEY_UNREADABLE")
    assert "signing secret" in delivery.last_error and "rotate" in delivery.last_error
    assert receiver.received == []


@pytest.mark.django_db
def test_without_the_sites_keys_a_webhook_secret_is_refused_as_such(api, owner, settings):
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    endpoint = webhook_endpoint_create(
        owner=owner, url="http://127.0.0.1:9/h", events=ALL_EVENTS
    ).endpoint
    stored = endpoint.secret_encrypted
    settings.PRODUCTION = True
    settings.GARDEN_FERNET_KEYS = []

    refused = api.post("/api/webhooks", {"url": "http://127.0.0.1:9/2", "events": ALL_EVENTS})
    assert refused.status_code == 400 and refused.json()["code"] == "ENCRYPTION_UNAVAILABLE"
    assert "GARDEN_FERNET_KEYS" in refused.json()["message"]
    assert "webhook secrets" in refused.json()["message"]
    assert "API key" not in refused.json()["message"]
    with pytest.raises(ServiceError) as rotated:
        webhook_endpoint_rotate_secret(endpoint=endpoint)
    assert rotated.value.code == "ENCRYPTION_UNAVAILABLE"
    assert list(WebhookEndpoint.objects.values_list("secret_encrypted", flat=True)) == [stored]


# --- access tokens ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_removing_an_endpoint_or_rotating_its_secret_needs_the_manage_scope(owner, settings):
    from garden.services.tokens import token_create

    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    endpoint = webhook_endpoint_create(
        owner=owner, url="http://127.0.0.1:9/h", events=ALL_EVENTS
    ).endpoint
    stored = endpoint.secret_encrypted
    writer = token_create(owner=owner, name="ci").secret  # read and write
    manager = token_create(owner=owner, name="m", scopes=["read", "write", "manage"]).secret

    def call(secret, method, path):
        return getattr(Client(), method)(
            path, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}"
        )

    rotate, detail = f"/api/webhooks/{endpoint.pk}/rotate-secret", f"/api/webhooks/{endpoint.pk}"
    for method, path in (("post", rotate), ("delete", detail)):
        refused = call(writer, method, path)
        assert refused.status_code == 403 and refused.json()["code"] == "TOKEN_SCOPE", path
        assert "'manage'" in refused.json()["message"]
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).secret_encrypted == stored
    assert call(writer, "post", f"/api/webhooks/{endpoint.pk}/test").status_code == 202

    rotated = call(manager, "post", rotate)
    assert rotated.status_code == 200 and rotated.json()["secret"].startswith("whsec_")
    assert call(manager, "delete", detail).status_code == 204
    assert not WebhookEndpoint.objects.exists()
