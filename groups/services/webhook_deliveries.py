"""Webhook deliveries: one per subscribed endpoint, created in the transaction that makes
the event so (a request's ending, an approval that waits, an endpoint's test), each sent after
commit (``groups.services.webhook_sending``). The caller holds the ending's group and request
rows."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Q, Subquery
from django.utils import timezone

from groups import scheduling
from groups.models import Approval, Group, GroupRequest, WebhookDelivery, WebhookEndpoint
from groups.payloads import WEBHOOK_REQUEST_EVENTS, approval_webhook_event, request_webhook_event

# The error of a delivery not queued because its owner has GARDEN_WEBHOOK_MAX_PENDING_PER_OWNER
# deliveries pending already.
BACKLOG_FULL = "WEBHOOK_BACKLOG_FULL"


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


def webhook_deliveries_create(
    endpoints: list[WebhookEndpoint],
    event_type: str,
    payload: dict[str, Any],
    *,
    request_id: int | None,
    at: datetime,
) -> list[WebhookDelivery]:
    """One delivery per endpoint, all with the event's one id (the ``webhook-id`` of every
    try), each sent after commit. Caller is in the transaction that makes the event so.

    Past the owner's GARDEN_WEBHOOK_MAX_PENDING_PER_OWNER deliveries pending, a delivery is
    recorded given up at once (``failed``, WEBHOOK_BACKLOG_FULL) and not sent: listed like any
    other, so nothing is dropped unseen. The count is read, not locked: two events at once may
    pass the cap by a few."""
    event_id = f"msg_{uuid.uuid4().hex}"
    room = settings.GARDEN_WEBHOOK_MAX_PENDING_PER_OWNER
    if endpoints:
        room -= pending_for_owner(endpoints[0].owner_id)
    full = (
        f"{BACKLOG_FULL}: {settings.GARDEN_WEBHOOK_MAX_PENDING_PER_OWNER} deliveries of this "
        "owner were pending already (GARDEN_WEBHOOK_MAX_PENDING_PER_OWNER); not sent."
    )
    created = WebhookDelivery.objects.bulk_create(
        [
            WebhookDelivery(
                endpoint=e,
                event_id=event_id,
                event_type=event_type,
                payload=payload,
                request_id=request_id,
                **(
                    {"next_attempt_at": at}
                    if n < room
                    else {
                        "state": WebhookDelivery.State.FAILED,
                        "last_error": full,
                        "finished_at": at,
                    }
                ),
            )
            for n, e in enumerate(endpoints)
        ]
    )
    scheduling.deliver_webhooks_on_commit(
        [d.pk for d in created if d.state == WebhookDelivery.State.PENDING]
    )
    return created


def pending_for_owner(owner_id: int) -> int:
    """How many of the owner's deliveries are not finished (waiting for a slot or a retry)."""
    return WebhookDelivery.objects.filter(
        endpoint__owner_id=owner_id, state=WebhookDelivery.State.PENDING
    ).count()


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
    return webhook_deliveries_create(endpoints, event_type, payload, request_id=request.pk, at=now)


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
    return webhook_deliveries_create(
        endpoints, "approval.pending", payload, request_id=request.pk, at=now
    )
