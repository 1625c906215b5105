"""The twelve-call budget: atomic reservation on the request row before every model call.

The counters on GroupRequest are the limit; each reservation also leaves a CallReservation
row for the audit trail. Never read-then-write: a conditional UPDATE's rowcount decides.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from garden import telemetry
from garden.pricing import PricedCall
from garden.providers import ConfirmedRejection, ProviderConfigError, ProviderError
from groups import statements
from groups.models import CallReservation, GroupRequest

_COUNTERS = statements.BUDGET_COUNTERS


@telemetry.traced("garden.reservation")
def reserve_call(
    *,
    request_id: int,
    purpose: str,
    agent_id: int,
    fence: int | None,
    attempt: int = 1,
    at: datetime | None = None,
) -> CallReservation | None:
    """Reserve one call of ``purpose`` on the request row; None when the budget is spent,
    the request is no longer in the state that may spend it, or ``fence`` moved.

    Working calls need state running, synthesis calls state synthesizing; maintenance calls
    (rollover) are counted on the same row and never taken from the twelve. A step's call
    (one with a ``fence``) also names ``agent_id`` as the request's working agent since ``at``
    (now unless given), in the same UPDATE.
    """
    return statements.reserve(
        request_id=request_id,
        purpose=purpose,
        agent_id=agent_id,
        fence=fence,
        attempt=attempt,
        at=at or timezone.now(),
    )


def release_call(*, reservation: CallReservation, reason: str) -> None:
    """Give a call back: only after a rejection the provider confirmed before doing any work,
    or for a call reserved ahead of its step that was never dispatched (the step made another
    call or none, or was left to another delivery)."""
    counter = _COUNTERS[reservation.purpose][0]
    with transaction.atomic():
        updated = CallReservation.objects.filter(
            pk=reservation.pk, status=CallReservation.Status.RESERVED
        ).update(status=CallReservation.Status.RELEASED, reason=reason, finished_at=timezone.now())
        if updated:
            GroupRequest.objects.filter(pk=reservation.request_id, **{f"{counter}__gt": 0}).update(
                **{counter: F(counter) - 1}
            )


def give_back_ahead(*, reservation: CallReservation) -> None:
    """Give back a call reserved ahead of its step (``groups.statements.record_step``) that
    was never dispatched, and stop naming its agent the request's working one for that step."""
    with transaction.atomic():
        release_call(reservation=reservation, reason="not dispatched")
        GroupRequest.objects.filter(
            pk=reservation.request_id, working_fence=reservation.fence
        ).update(working_agent=None, working_since=None)


def consume_call(
    *, reservation: CallReservation, reason: str = "", call: PricedCall | None = None
) -> None:
    """The call ran, or may have (an ambiguous failure): it stays counted. ``call``, when its
    reply came, is recorded on the reservation and its tokens and cost added to the request's
    (one unpriced call when its model has no price), in one transaction."""
    recorded = call.recorded() if call is not None else {}
    with transaction.atomic():
        updated = CallReservation.objects.filter(
            pk=reservation.pk, status=CallReservation.Status.RESERVED
        ).update(
            status=CallReservation.Status.CONSUMED,
            reason=reason,
            finished_at=timezone.now(),
            **recorded,
        )
        if updated and call is not None:
            GroupRequest.objects.filter(pk=reservation.request_id).update(
                input_tokens=F("input_tokens") + call.input_tokens,
                output_tokens=F("output_tokens") + call.output_tokens,
                cost=F("cost") + (call.cost or 0),
                unpriced_calls=F("unpriced_calls") + int(call.cost is None),
            )


def settle_failed_call(*, reservation: CallReservation, failure: ProviderError) -> None:
    """Count a failed call as the seed says: given back after a confirmed rejection or a
    configuration error (nothing was sent, or nothing done); kept for anything ambiguous."""
    if isinstance(failure, (ConfirmedRejection, ProviderConfigError)):
        release_call(reservation=reservation, reason=failure.code)
    else:
        consume_call(reservation=reservation, reason=failure.code)
