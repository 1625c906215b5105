"""An owner's webhook backlog stays bounded: deliveries waiting for a slot look again ever more
rarely the more of them wait, none waits past its window (WEBHOOK_EXPIRED), and past the owner's
cap of pending deliveries a new event's delivery is recorded given up (WEBHOOK_BACKLOG_FULL)
instead of queued.

The owner's slots are held as a try to a receiver that never answers holds them; the tries
waiting are driven by calling ``webhook_delivery_attempt`` as the task does, with the clock
moved on by rewriting each delivery's timestamps (no sleeps)."""

from __future__ import annotations

import heapq
from datetime import timedelta

import pytest
from django.utils import timezone

from garden.slots import WEBHOOKS, slot_hold
from groups.models import WebhookAttempt, WebhookDelivery
from groups.services.webhook_deliveries import webhook_deliveries_create
from groups.services.webhook_sending import webhook_delivery_attempt
from groups.services.webhooks import webhook_endpoint_create

EVENTS = ["request.completed"]
URL = "http://127.0.0.1:9/hook"  # never reached: every slot of the owner stays taken


@pytest.fixture
def allowed(settings):
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    settings.GARDEN_MAX_WEBHOOKS_IN_FLIGHT_PER_OWNER = 2
    settings.GARDEN_WEBHOOK_TIMEOUT = 10.0
    settings.GARDEN_CALL_SLOT_RETRY_SECONDS = 1.0
    settings.GARDEN_SLOT_RETRY_MAX_SECONDS = 10.0


def _event(endpoint, n: int = 1) -> list[WebhookDelivery]:
    made: list[WebhookDelivery] = []
    for _ in range(n):
        made += webhook_deliveries_create(
            [endpoint],
            "request.completed",
            {"type": "request.completed", "timestamp": "t", "data": {}},
            request_id=None,
            at=timezone.now(),
        )
    return made


def _held(owner_id: int, count: int):
    held = [slot_hold(owner_id=owner_id, kind=WEBHOOKS) for _ in range(count)]
    assert all(h is not None for h in held)
    return held


def _drive(ids: list[int], *, window: float) -> tuple[int, dict[int, str]]:
    """Run each delivery's tries as its messages would arrive, over ``window`` seconds of
    virtual time: a try runs when due (its delivery's timestamps moved back by the time that
    passed), and one that waits is due again after the pause it wrote. Returns the number of
    runs and each delivery's last outcome."""
    runs = 0
    last: dict[int, str] = {}
    due = [(0.0, pk, 0) for pk in ids]
    heapq.heapify(due)
    while due and due[0][0] <= window:
        at, pk, waits = heapq.heappop(due)
        now = timezone.now()
        WebhookDelivery.objects.filter(pk=pk).update(
            next_attempt_at=now, created_at=now - timedelta(seconds=at)
        )
        last[pk] = webhook_delivery_attempt(delivery_id=pk, waits=waits)
        runs += 1
        if last[pk] == "waiting for a slot":
            after = WebhookDelivery.objects.get(pk=pk).next_attempt_at
            heapq.heappush(due, (at + (after - now).total_seconds(), pk, waits + 1))
    return runs, last


@pytest.mark.django_db(transaction=True)
def test_deliveries_waiting_for_a_slot_look_again_boundedly_often(allowed, owner):
    """28 deliveries behind two tries held by a receiver that never answers: over 150 s their
    looks stay within about two per slot per GARDEN_WEBHOOK_TIMEOUT (before, each looked every
    ≤ 10 s: some 600 runs)."""
    endpoint = webhook_endpoint_create(owner=owner, url=URL, events=EVENTS).endpoint
    ids = [d.pk for d in _event(endpoint, 28)]
    held = _held(owner.pk, 2)
    try:
        runs, last = _drive(ids, window=150.0)
    finally:
        for h in held:
            h.release()
    bound = 2 * len(ids) + 2 * 150 * 2 / 10
    assert runs <= bound, f"{runs} runs for {len(ids)} waiting deliveries in 150 s"
    assert set(last.values()) == {"waiting for a slot"}
    assert not WebhookAttempt.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_delivery_waiting_past_its_window_gives_up_named(allowed, owner, settings):
    settings.GARDEN_WEBHOOK_RETRY_SECONDS = 60.0
    endpoint = webhook_endpoint_create(owner=owner, url=URL, events=EVENTS).endpoint
    (delivery,) = _event(endpoint)
    held = _held(owner.pk, 2)
    try:
        runs, last = _drive([delivery.pk], window=3600.0)
    finally:
        for h in held:
            h.release()
    delivery.refresh_from_db()
    assert last == {delivery.pk: "expired"}
    assert delivery.state == "failed" and delivery.finished_at is not None
    assert delivery.next_attempt_at is None and delivery.attempts == 0
    assert delivery.last_error.startswith("WEBHOOK_EXPIRED")
    assert runs < 20  # its last pause ends at its expiry, not after
    assert webhook_delivery_attempt(delivery_id=delivery.pk) == "not due"


@pytest.mark.django_db(transaction=True)
def test_past_the_owners_cap_a_delivery_is_recorded_given_up_and_not_queued(
    allowed, owner, stranger, settings
):
    settings.GARDEN_WEBHOOK_MAX_PENDING_PER_OWNER = 3
    mine = webhook_endpoint_create(owner=owner, url=URL, events=EVENTS).endpoint
    theirs = webhook_endpoint_create(owner=stranger, url=URL, events=EVENTS).endpoint
    made = _event(mine, 5)
    states = [(d.state, d.last_error.split(":")[0]) for d in made]
    assert states == [("pending", "")] * 3 + [("failed", "WEBHOOK_BACKLOG_FULL")] * 2
    dropped = WebhookDelivery.objects.filter(last_error__startswith="WEBHOOK_BACKLOG_FULL")
    assert dropped.count() == 2
    assert all(d.finished_at and d.next_attempt_at is None for d in dropped)
    # Another owner's backlog is its own.
    (other,) = _event(theirs)
    assert other.state == "pending"
    # A dropped one is never tried; once one of the pending finishes, there is room again.
    assert webhook_delivery_attempt(delivery_id=dropped[0].pk) == "not due"
    WebhookDelivery.objects.filter(pk=made[0].pk).update(state="delivered")
    (again,) = _event(mine)
    assert again.state == "pending"


@pytest.mark.django_db(transaction=True)
def test_dropped_deliveries_are_listed_with_their_reason(api, owner, settings):
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]
    settings.GARDEN_WEBHOOK_MAX_PENDING_PER_OWNER = 1
    endpoint = webhook_endpoint_create(owner=owner, url=URL, events=EVENTS).endpoint
    _event(endpoint, 2)
    response = api.get(f"/api/webhooks/{endpoint.pk}/deliveries")
    assert response.status_code == 200, response.content
    body = response.json()
    rows = body["results"] if isinstance(body, dict) else body
    assert sorted(r["state"] for r in rows) == ["failed", "pending"]
    assert any(r["last_error"].startswith("WEBHOOK_BACKLOG_FULL") for r in rows)
