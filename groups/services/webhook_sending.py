"""Sending webhook deliveries: each try signed (Standard Webhooks), sent through the egress
policy outside any transaction, logged, and retried with back-off for a bounded time; the sweep
of lost tries and the purge of old deliveries.

Lock order: a try changes its own delivery row (claimed by a conditional UPDATE) and then its
endpoint's. A try holds one of its owner's webhook slots (``garden.slots.WEBHOOKS``) while it
sends, so one owner's receivers hold at most GARDEN_MAX_WEBHOOKS_IN_FLIGHT_PER_OWNER worker
threads."""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpcore
import httpx
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from garden import egress, metrics
from garden.credentials import CredentialError, api_key_decrypt
from garden.slots import WEBHOOKS, slot_backoff, slot_hold
from groups import scheduling
from groups.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from groups.services.webhook_deliveries import pending_for_owner
from groups.services.webhooks import refusal_text

# A try's claim outlasts its deadline by this much: a sweep re-sends it only after its worker
# must have died.
_CLAIM_MARGIN = 30.0
# A try sent with a countdown may arrive a little early by another host's clock.
_EARLY = timedelta(seconds=2)
# The longest pause between tries, whatever GARDEN_WEBHOOK_BACKOFF says (garden.E012 names a
# value past it at start-up).
MAX_BACKOFF = 86400.0
# The error a delivery gives up with when its window passed while it waited for a slot.
EXPIRED = "WEBHOOK_EXPIRED"


@dataclass(frozen=True)
class Tried:
    """What one try got back: an HTTP status, or why there was none."""

    status: int | None
    error: str
    duration_ms: int
    refused: bool = False

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def sign(*, secret: str, event_id: str, timestamp: int, body: str) -> str:
    """The ``webhook-signature`` header of the Standard Webhooks spec (``v1,<base64>``)."""
    return Webhook(secret).sign(event_id, datetime.fromtimestamp(timestamp, UTC), body)


def _client() -> httpx.Client:
    return egress.shared("webhook", lambda: egress.build_client("webhook"))


def _post(endpoint: WebhookEndpoint, delivery: WebhookDelivery, secret: str) -> Tried:
    """POST the delivery, signed, through the egress policy: only to the address checked,
    redirects not followed, the body of the answer not read, all within GARDEN_WEBHOOK_TIMEOUT."""
    body = json.dumps(delivery.payload, separators=(",", ":"), ensure_ascii=False)
    stamp = int(time.time())
    headers = {
        "content-type": "application/json",
        "user-agent": "garden-webhooks/1",
        "webhook-id": delivery.event_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(
            secret=secret, event_id=delivery.event_id, timestamp=stamp, body=body
        ),
    }
    timeout = settings.GARDEN_WEBHOOK_TIMEOUT
    began = time.monotonic()

    def took() -> int:
        return int((time.monotonic() - began) * 1000)

    try:
        with egress.deadline(timeout, owner_id=endpoint.owner_id):
            with _client().stream(
                "POST", endpoint.url, content=body.encode(), headers=headers, timeout=timeout
            ) as response:
                status = response.status_code
    except egress.EgressRefused as exc:
        return Tried(None, f"{exc.code}: {refusal_text(exc)}"[:300], took(), refused=True)
    except (httpx.TimeoutException, httpcore.TimeoutException):
        return Tried(None, f"no answer within {timeout:g} s", took())
    except (httpx.HTTPError, httpcore.ConnectError, httpcore.NetworkError, OSError) as exc:
        return Tried(None, (str(exc) or type(exc).__name__)[:300], took())
    error = "" if 200 <= status < 300 else f"HTTP {status}"
    if 300 <= status < 400:
        error += " (redirects are not followed)"
    return Tried(status, error, took())


def _backoff(number: int) -> float:
    """The pause after try ``number`` (GARDEN_WEBHOOK_BACKOFF; its last step repeats), within
    0..MAX_BACKOFF whatever the setting holds: a pause that cannot be scheduled would leave the
    try unrecorded, and the sweep would send it again for ever."""
    steps = settings.GARDEN_WEBHOOK_BACKOFF or [60.0]
    wait = float(steps[min(number, len(steps)) - 1])
    if math.isnan(wait):
        return MAX_BACKOFF
    return min(max(wait, 0.0), MAX_BACKOFF)


def webhook_delivery_attempt(*, delivery_id: int, waits: int = 0) -> str:
    """One try of a delivery, if it is pending and due; idempotent (a duplicate or early
    message, or one for a delivery another worker is trying, does nothing).

    The try takes one of its owner's webhook slots first; with none free it sends and records
    nothing and comes back later (``_wait_for_slot``; ``waits`` counts its earlier looks). It
    is claimed by moving ``next_attempt_at`` past its deadline (one conditional UPDATE), sent
    outside any transaction, then recorded: a 2xx delivers it; 410 Gone, a refusal of the
    egress policy, or the last try allowed (GARDEN_WEBHOOK_MAX_ATTEMPTS within
    GARDEN_WEBHOOK_RETRY_SECONDS) gives it up; anything else schedules the next try."""
    due = WebhookDelivery.objects.filter(
        pk=delivery_id,
        state=WebhookDelivery.State.PENDING,
        next_attempt_at__lte=timezone.now() + _EARLY,
    )
    found = due.values_list("next_attempt_at", "endpoint__owner_id", "created_at").first()
    if found is None:
        return "not due"
    due_at, owner_id, created_at = found
    expires_at = created_at + timedelta(seconds=settings.GARDEN_WEBHOOK_RETRY_SECONDS)
    if timezone.now() >= expires_at:
        return _expire(delivery_id)
    slot = slot_hold(owner_id=owner_id, kind=WEBHOOKS)
    if slot is None:
        return _wait_for_slot(
            delivery_id, owner_id=owner_id, due_at=due_at, expires_at=expires_at, waits=waits
        )
    with slot:
        lease = timezone.now() + timedelta(seconds=settings.GARDEN_WEBHOOK_TIMEOUT + _CLAIM_MARGIN)
        if not due.update(next_attempt_at=lease):
            return "not due"
        delivery = WebhookDelivery.objects.select_related("endpoint").filter(pk=delivery_id).first()
        if delivery is None:
            return "gone"
        endpoint = delivery.endpoint
        if not endpoint.enabled:
            _give_up_unsent(delivery, "The endpoint is disabled.")
            return "endpoint disabled"
        try:
            secret = api_key_decrypt(endpoint.secret_encrypted)
        except CredentialError as exc:
            why = "the endpoint's signing secret cannot be decrypted with this site's keys"
            tried = Tried(None, f"{exc.code}: {why}; rotate it.", 0, refused=True)
        else:
            assert not connection.in_atomic_block, "a webhook is never sent inside a transaction"
            tried = _post(endpoint, delivery, secret)
    return _record(delivery, tried)


def _wait_for_slot(
    delivery_id: int, *, owner_id: int, due_at: datetime, expires_at: datetime, waits: int
) -> str:
    """Every webhook slot of the owner is taken: send nothing and record no attempt; move the
    next try on by the pause (one conditional write, so the sweep does not take the delivery
    for lost, and a duplicate message finds it not due) and come back then, or at its expiry.

    The pause is the slot back-off or, when more of the owner's deliveries are pending than it
    has slots, the time the ones ahead take at most (GARDEN_WEBHOOK_TIMEOUT each, shared by its
    slots), jittered: however many wait, the owner's looks add up to about two per slot per
    GARDEN_WEBHOOK_TIMEOUT."""
    metrics.slot_wait("webhooks")
    slots = max(1, settings.GARDEN_MAX_WEBHOOKS_IN_FLIGHT_PER_OWNER)
    ahead = max(0, pending_for_owner(owner_id) - slots)
    turn = settings.GARDEN_WEBHOOK_TIMEOUT * ahead / slots * random.uniform(0.5, 1.0)
    now = timezone.now()
    pause = min(max(slot_backoff(waits), turn), max(0.0, (expires_at - now).total_seconds()))
    moved = WebhookDelivery.objects.filter(
        pk=delivery_id, state=WebhookDelivery.State.PENDING, next_attempt_at=due_at
    ).update(next_attempt_at=now + timedelta(seconds=pause))
    if not moved:
        return "not due"  # another message of it got there first
    scheduling.send(
        scheduling.DELIVER_WEBHOOK, countdown=pause, delivery_id=delivery_id, waits=waits + 1
    )
    return "waiting for a slot"


def _expire(delivery_id: int) -> str:
    """The delivery is still pending GARDEN_WEBHOOK_RETRY_SECONDS after its event (it waited
    for a slot that long): it gives up unsent, saying so (WEBHOOK_EXPIRED)."""
    why = (
        f"{EXPIRED}: still not sent {settings.GARDEN_WEBHOOK_RETRY_SECONDS:g} s after the event "
        "(GARDEN_WEBHOOK_RETRY_SECONDS); the owner's webhook slots stayed taken."
    )
    gave_up = WebhookDelivery.objects.filter(
        pk=delivery_id, state=WebhookDelivery.State.PENDING
    ).update(
        state=WebhookDelivery.State.FAILED,
        last_error=why[:300],
        next_attempt_at=None,
        finished_at=timezone.now(),
    )
    return "expired" if gave_up else "not due"


def _give_up_unsent(delivery: WebhookDelivery, why: str) -> None:
    WebhookDelivery.objects.filter(pk=delivery.pk, state=WebhookDelivery.State.PENDING).update(
        state=WebhookDelivery.State.FAILED,
        last_error=why,
        next_attempt_at=None,
        finished_at=timezone.now(),
    )


def _record(delivery: WebhookDelivery, tried: Tried) -> str:
    number = delivery.attempts + 1
    now = timezone.now()
    wait = _backoff(number)
    over = number >= settings.GARDEN_WEBHOOK_MAX_ATTEMPTS or (
        now + timedelta(seconds=wait) - delivery.created_at
    ) > timedelta(seconds=settings.GARDEN_WEBHOOK_RETRY_SECONDS)
    gone = tried.status == 410
    if tried.ok:
        state = WebhookDelivery.State.DELIVERED
    elif gone or tried.refused or over:
        state = WebhookDelivery.State.FAILED
    else:
        state = WebhookDelivery.State.PENDING
    finished = state != WebhookDelivery.State.PENDING
    with transaction.atomic():
        written = WebhookDelivery.objects.filter(
            pk=delivery.pk, state=WebhookDelivery.State.PENDING, attempts=delivery.attempts
        ).update(
            state=state,
            attempts=number,
            last_status=tried.status,
            last_error=tried.error,
            next_attempt_at=None if finished else now + timedelta(seconds=wait),
            finished_at=now if finished else None,
        )
        if not written:
            # Its endpoint was deleted meanwhile, or another try was recorded: nothing to add.
            return "stale"
        WebhookAttempt.objects.create(
            delivery_id=delivery.pk,
            number=number,
            status=tried.status,
            error=tried.error,
            duration_ms=tried.duration_ms,
        )
        endpoint_id = delivery.endpoint_id
        if state == WebhookDelivery.State.DELIVERED:
            WebhookEndpoint.objects.filter(pk=endpoint_id, consecutive_failures__gt=0).update(
                consecutive_failures=0
            )
        elif state == WebhookDelivery.State.FAILED:
            _count_failure(endpoint_id, gone=gone, last=tried.error, at=now)
        else:
            scheduling.deliver_webhook_later_on_commit(delivery.pk, countdown=wait)
    return state


def _count_failure(endpoint_id: int, *, gone: bool, last: str, at: datetime) -> None:
    """A delivery gave up: count it; a 410 Gone, or GARDEN_WEBHOOK_DISABLE_AFTER in a row,
    disables the endpoint, its reason shown to the owner (the API's ``disabled_reason``, a
    notice on the dashboard's Webhooks page)."""
    WebhookEndpoint.objects.filter(pk=endpoint_id).update(
        consecutive_failures=F("consecutive_failures") + 1
    )
    failures = (
        WebhookEndpoint.objects.filter(pk=endpoint_id)
        .values_list("consecutive_failures", flat=True)
        .first()
    )
    limit = settings.GARDEN_WEBHOOK_DISABLE_AFTER
    if gone:
        reason = "The receiver answered 410 Gone."
    elif failures is not None and failures >= limit:
        reason = f"{failures} deliveries in a row gave up (last: {last or 'no answer'})."
    else:
        return
    WebhookEndpoint.objects.filter(pk=endpoint_id, enabled=True).update(
        enabled=False, disabled_reason=reason[:200], disabled_at=at, updated_at=at
    )


def webhook_delivery_sweep(*, late_seconds: float | None = None) -> int:
    """Send again the pending deliveries whose next try is well past (the worker that had it
    died, or its message was lost); the try's claim keeps a live one from being sent twice."""
    late = _CLAIM_MARGIN if late_seconds is None else late_seconds
    due = list(
        WebhookDelivery.objects.filter(
            state=WebhookDelivery.State.PENDING,
            next_attempt_at__lte=timezone.now() - timedelta(seconds=late),
        )
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:500]
    )
    for delivery_id in due:
        scheduling.send(scheduling.DELIVER_WEBHOOK, delivery_id=delivery_id)
    return len(due)


def webhook_delivery_purge(*, keep_days: int | None = None) -> int:
    """Remove finished deliveries (and their attempts) older than GARDEN_WEBHOOK_KEEP_DAYS."""
    days = settings.GARDEN_WEBHOOK_KEEP_DAYS if keep_days is None else keep_days
    cutoff = timezone.now() - timedelta(days=days)
    deleted, _ = WebhookDelivery.objects.filter(
        state__in=[WebhookDelivery.State.DELIVERED, WebhookDelivery.State.FAILED],
        finished_at__lt=cutoff,
    ).delete()
    return deleted
