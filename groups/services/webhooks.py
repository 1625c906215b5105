"""Webhooks: an owner's endpoints (checked against the egress policy when saved, a signing
secret shown once), the deliveries an ending request or a waiting approval creates in the
transaction that makes it so, and the tries that send them (Standard Webhooks signatures,
through the egress policy, retried with back-off for a bounded time, each try logged).

Lock order: the ending's group and request rows are held by the caller; a delivery's try
changes its own row (claimed by a conditional UPDATE) and then its endpoint's. A try holds one
of its owner's webhook slots (``garden.slots.WEBHOOKS``) while it sends, so one owner's
receivers hold at most GARDEN_MAX_WEBHOOKS_IN_FLIGHT_PER_OWNER worker threads."""

from __future__ import annotations

import base64
import json
import math
import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpcore
import httpx
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import F, Q, Subquery
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from garden import egress, metrics
from garden.credentials import CredentialError, api_key_decrypt, api_key_encrypt
from garden.errors import QuotaExceeded, ServiceError
from garden.models import Approval
from garden.quotas import quota_hold
from garden.slots import WEBHOOKS, slot_backoff, slot_hold
from groups import scheduling, selectors
from groups.models import Group, GroupRequest, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from groups.payloads import WEBHOOK_REQUEST_EVENTS, approval_webhook_event, request_webhook_event

EVENTS: tuple[str, ...] = tuple(WebhookEndpoint.Event.values)
TEST_EVENT = "webhook.test"
SECRET_PREFIX = "whsec_"
MAX_URL = 2000
MAX_DESCRIPTION = 200
# A try's claim outlasts its deadline by this much: a sweep re-sends it only after its worker
# must have died.
_CLAIM_MARGIN = 30.0
# A try sent with a countdown may arrive a little early by another host's clock.
_EARLY = timedelta(seconds=2)
# The longest pause between tries, whatever GARDEN_WEBHOOK_BACKOFF says (garden.E012 names a
# value past it at start-up).
MAX_BACKOFF = 86400.0
_UNCHANGED: Any = object()
# A refusal for where the URL leads, said without the address its name resolved to: what an
# internal name resolves to is not the owner's to learn.
_REFUSED_DESTINATION = (
    "The URL's host is a loopback, private, link-local or metadata address, which webhooks "
    "may not reach (GARDEN_EGRESS_ALLOW_WEBHOOK)."
)


# --- endpoints ------------------------------------------------------------------------------


@dataclass(frozen=True)
class EndpointWithSecret:
    """An endpoint just created or whose secret was just rotated, and that secret: the one
    time it is shown."""

    endpoint: WebhookEndpoint
    secret: str


def _new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _encrypt(secret: str) -> str:
    try:
        return api_key_encrypt(secret)
    except CredentialError:
        raise ServiceError(
            "ENCRYPTION_UNAVAILABLE",
            "The operator has not set GARDEN_FERNET_KEYS: webhook secrets cannot be stored.",
        ) from None


def _refusal(exc: egress.EgressRefused) -> str:
    return _REFUSED_DESTINATION if exc.destination else exc.message


def _check_url(url: str, *, owner_id: int) -> str:
    """A URL the egress policy lets a delivery reach: refused by name (EGRESS_REFUSED) when its
    host is, or resolves to, a loopback, private, link-local or metadata address the operator
    has not allowed (GARDEN_EGRESS_ALLOW_WEBHOOK). A name that does not resolve now is kept:
    every try checks it again, which is what protects."""
    url = (url or "").strip() if isinstance(url, str) else ""
    if len(url) > MAX_URL:
        raise ServiceError(
            "INVALID_URL", f"A webhook's URL is at most {MAX_URL} characters.", field="url"
        )
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        raise ServiceError("INVALID_URL", "Not a URL.", field="url") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ServiceError("INVALID_URL", "A webhook's URL is http(s)://host/path.", field="url")
    try:
        egress.check_url(url, "webhook")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        with egress.deadline(settings.GARDEN_EGRESS_DNS_TIMEOUT, owner_id=owner_id):
            egress.check_host(parsed.host, port, "webhook")
    except egress.EgressRefused as exc:
        raise ServiceError(exc.code, _refusal(exc), field="url") from None
    except (httpcore.ConnectError, httpcore.ConnectTimeout, OSError):
        pass
    return url


def _check_events(events: Any) -> list[str]:
    if (
        not isinstance(events, list | tuple)
        or not events
        or not all(isinstance(e, str) and e in EVENTS for e in events)
    ):
        raise ServiceError(
            "INVALID_EVENTS",
            "events is a non-empty list of: " + ", ".join(EVENTS) + ".",
            field="events",
        )
    return [e for e in EVENTS if e in events]


def _check_group(owner: AbstractBaseUser, group_id: int | None) -> Group | None:
    if group_id is None:
        return None
    group = selectors.group_get(owner=owner, group_id=group_id)
    if group is None:
        raise ServiceError("GROUP_NOT_FOUND", "You have no such group.", field="group")
    return group


def _check_description(description: Any) -> str:
    if not isinstance(description, str) or len(description.strip()) > MAX_DESCRIPTION:
        raise ServiceError(
            "INVALID_DESCRIPTION",
            f"A description is text of at most {MAX_DESCRIPTION} characters.",
            field="description",
        )
    return description.strip()


def webhook_endpoint_create(
    *,
    owner: AbstractBaseUser,
    url: str,
    events: list[str],
    group: int | None = None,
    named_only: bool = False,
    description: str = "",
) -> EndpointWithSecret:
    """Register an endpoint for ``events`` of one of the owner's groups (``group``) or of all
    of them (None); ``named_only`` ones hear only the requests whose message names them.
    Checked first (nothing stored on a refusal), then stored under the owner's quota
    (GARDEN_MAX_WEBHOOKS_PER_OWNER). The secret is returned here and never again."""
    url = _check_url(url, owner_id=owner.pk)
    events = _check_events(events)
    found = _check_group(owner, group)
    description = _check_description(description)
    secret = _new_secret()
    limit = settings.GARDEN_MAX_WEBHOOKS_PER_OWNER
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.create(
            owner=owner,
            group=found,
            named_only=bool(named_only),
            url=url,
            description=description,
            events=events,
            secret_encrypted=_encrypt(secret),
        )
        quota_hold(
            owner_id=owner.pk,
            limit=limit,
            count=WebhookEndpoint.objects.filter(owner=owner).count,
            refusal=lambda: QuotaExceeded(
                "WEBHOOK_LIMIT",
                f"You have {limit} webhook endpoints, the limit on this site; remove one first.",
            ),
        )
    return EndpointWithSecret(endpoint=endpoint, secret=secret)


def webhook_endpoint_update(
    *,
    endpoint: WebhookEndpoint,
    url: str = _UNCHANGED,
    events: list[str] = _UNCHANGED,
    group: int | None = _UNCHANGED,
    named_only: bool = _UNCHANGED,
    description: str = _UNCHANGED,
    enabled: bool = _UNCHANGED,
) -> WebhookEndpoint:
    """Change what is given; the rest stays. Enabling a disabled endpoint clears its reason
    and its count of failures (the owner says the receiver is back)."""
    changes: dict[str, Any] = {}
    if url is not _UNCHANGED:
        changes["url"] = _check_url(url, owner_id=endpoint.owner_id)
    if events is not _UNCHANGED:
        changes["events"] = _check_events(events)
    if group is not _UNCHANGED:
        changes["group"] = _check_group(endpoint.owner, group)
    if named_only is not _UNCHANGED:
        changes["named_only"] = bool(named_only)
    if description is not _UNCHANGED:
        changes["description"] = _check_description(description)
    if enabled is not _UNCHANGED:
        changes["enabled"] = bool(enabled)
        if enabled and not endpoint.enabled:
            changes.update(disabled_reason="", disabled_at=None, consecutive_failures=0)
        elif not enabled and endpoint.enabled:
            changes.update(disabled_reason="Disabled by you.", disabled_at=timezone.now())
    if changes:
        changes["updated_at"] = timezone.now()
        if not WebhookEndpoint.objects.filter(pk=endpoint.pk).update(**changes):
            raise _gone()
    endpoint.refresh_from_db()
    return endpoint


def webhook_endpoint_rotate_secret(*, endpoint: WebhookEndpoint) -> EndpointWithSecret:
    """A new signing secret, returned this once; every try from now on is signed with it."""
    secret = _new_secret()
    if not WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        secret_encrypted=_encrypt(secret), updated_at=timezone.now()
    ):
        raise _gone()
    endpoint.refresh_from_db()
    return EndpointWithSecret(endpoint=endpoint, secret=secret)


def webhook_endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    """Remove the endpoint with its deliveries; a try in flight finds it gone and stops."""
    WebhookEndpoint.objects.filter(pk=endpoint.pk).delete()


def webhook_endpoint_test(*, endpoint: WebhookEndpoint) -> WebhookDelivery:
    """Send a ``webhook.test`` event to the endpoint (whatever its events), as any other
    delivery: signed, logged, retried."""
    if not endpoint.enabled:
        raise ServiceError(
            "WEBHOOK_DISABLED", "This endpoint is disabled; enable it first.", status=409
        )
    now = timezone.now()
    payload = {
        "type": TEST_EVENT,
        "timestamp": now.isoformat(),
        "data": {"endpoint": endpoint.pk},
    }
    with transaction.atomic():
        (delivery,) = _deliveries_create([endpoint], TEST_EVENT, payload, request_id=None, at=now)
    return delivery


def _gone() -> ServiceError:
    return ServiceError("NOT_FOUND", "No such webhook endpoint.", status=404)


def webhook_named_check(*, owner_id: int, group_id: int, endpoint_id: int | None) -> int | None:
    """The endpoint a script names on its message: the poster's own, for this group or for all
    of them (refused by name otherwise, and the message is not stored)."""
    if endpoint_id is None:
        return None
    found = WebhookEndpoint.objects.filter(
        Q(group__isnull=True) | Q(group_id=group_id), pk=endpoint_id, owner_id=owner_id
    ).exists()
    if not found:
        raise ServiceError(
            "WEBHOOK_NOT_FOUND",
            "You have no such webhook endpoint for this group.",
            field="webhook",
        )
    return endpoint_id


# --- deliveries -----------------------------------------------------------------------------


def _subscribed(*, group_id: int, named_id: int | None, event_type: str) -> list[WebhookEndpoint]:
    """The enabled endpoints of the group's owner that hear ``event_type`` of this group: those
    for all its groups or for this one (unless named-only), and the one its message named."""
    owner = Subquery(Group.objects.filter(pk=group_id).values("owner_id")[:1])
    here = Q(group__isnull=True) | Q(group_id=group_id)
    heard = Q(named_only=False) & here
    if named_id is not None:
        heard |= Q(pk=named_id) & here
    # events is filtered here, not in SQL: the embedded default's SQLite has no JSON contains.
    return [
        e
        for e in WebhookEndpoint.objects.filter(heard, owner_id=owner, enabled=True)
        if event_type in e.events
    ]


def _deliveries_create(
    endpoints: list[WebhookEndpoint],
    event_type: str,
    payload: dict[str, Any],
    *,
    request_id: int | None,
    at: datetime,
) -> list[WebhookDelivery]:
    """One delivery per endpoint, all with the event's one id (the ``webhook-id`` of every
    try), each sent after commit. Caller is in the transaction that makes the event so."""
    event_id = f"msg_{uuid.uuid4().hex}"
    created = WebhookDelivery.objects.bulk_create(
        [
            WebhookDelivery(
                endpoint=e,
                event_id=event_id,
                event_type=event_type,
                payload=payload,
                request_id=request_id,
                next_attempt_at=at,
            )
            for e in endpoints
        ]
    )
    scheduling.deliver_webhooks_on_commit([d.pk for d in created])
    return created


def webhook_deliveries_for_request(*, request: GroupRequest) -> list[WebhookDelivery]:
    """The deliveries of a request's ending (``request_finish``): caller holds the request
    row, in the transaction that ends it, so the event exists exactly when the ending does."""
    event_type = WEBHOOK_REQUEST_EVENTS.get(request.state)
    if event_type is None:
        return []
    endpoints = _subscribed(
        group_id=request.group_id, named_id=request.webhook_id, event_type=event_type
    )
    if not endpoints:
        return []
    now = timezone.now()
    payload = request_webhook_event(request, at=now)
    return _deliveries_create(endpoints, event_type, payload, request_id=request.pk, at=now)


def webhook_deliveries_for_approval(*, approval: Approval) -> list[WebhookDelivery]:
    """The deliveries of an approval that waits (``approval.pending``), in the transaction
    that creates it."""
    request = approval.request
    if request is None:
        return []
    endpoints = _subscribed(
        group_id=request.group_id, named_id=request.webhook_id, event_type="approval.pending"
    )
    if not endpoints:
        return []
    now = timezone.now()
    payload = approval_webhook_event(approval, at=now)
    return _deliveries_create(endpoints, "approval.pending", payload, request_id=request.pk, at=now)


# --- tries ----------------------------------------------------------------------------------


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
        return Tried(None, f"{exc.code}: {_refusal(exc)}"[:300], took(), refused=True)
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
    found = due.values_list("next_attempt_at", "endpoint__owner_id").first()
    if found is None:
        return "not due"
    due_at, owner_id = found
    slot = slot_hold(owner_id=owner_id, kind=WEBHOOKS)
    if slot is None:
        return _wait_for_slot(delivery_id, due_at=due_at, waits=waits)
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


def _wait_for_slot(delivery_id: int, *, due_at: datetime, waits: int) -> str:
    """Every webhook slot of the owner is taken: send nothing and record no attempt; move the
    next try on by the pause (one conditional write, so the sweep does not take the delivery
    for lost, and a duplicate message finds it not due) and come back then."""
    metrics.slot_wait("webhooks")
    pause = slot_backoff(waits)
    moved = WebhookDelivery.objects.filter(
        pk=delivery_id, state=WebhookDelivery.State.PENDING, next_attempt_at=due_at
    ).update(next_attempt_at=timezone.now() + timedelta(seconds=pause))
    if not moved:
        return "not due"  # another message of it got there first
    scheduling.send(
        scheduling.DELIVER_WEBHOOK, countdown=pause, delivery_id=delivery_id, waits=waits + 1
    )
    return "waiting for a slot"


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
