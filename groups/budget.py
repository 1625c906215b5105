"""The twelve-call budget: atomic reservation on the request row before every model call.

The counters on GroupRequest are the limit; each reservation also leaves a CallReservation
row for the audit trail. Never read-then-write: a conditional UPDATE's rowcount decides.
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from garden import telemetry
from garden.pricing import PricedCall
from garden.providers import ConfirmedRejection, ProviderConfigError, ProviderError
from groups.models import (
    MAINTENANCE_CALLS,
    SYNTHESIS_CALLS,
    WORKING_CALLS,
    CallReservation,
    GroupRequest,
)

_COUNTERS = {
    CallReservation.Purpose.WORKING: (
        "working_reserved",
        WORKING_CALLS,
        GroupRequest.State.RUNNING,
    ),
    CallReservation.Purpose.SYNTHESIS: (
        "synthesis_reserved",
        SYNTHESIS_CALLS,
        GroupRequest.State.SYNTHESIZING,
    ),
    CallReservation.Purpose.MAINTENANCE: ("maintenance_reserved", MAINTENANCE_CALLS, None),
}


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
    counter, limit, state = _COUNTERS[purpose]
    at = at or timezone.now()
    if connection.vendor == "postgresql":
        return _reserve_in_one_statement(
            request_id=request_id,
            purpose=purpose,
            agent_id=agent_id,
            fence=fence,
            attempt=attempt,
            at=at,
        )
    filters = {"pk": request_id, f"{counter}__lt": limit}
    if state is not None:
        filters["state"] = state
    changes = {counter: F(counter) + 1}
    if fence is not None:
        filters["fence"] = fence
        changes.update(working_agent_id=agent_id, working_since=at, working_fence=fence)
    with transaction.atomic():
        if not GroupRequest.objects.filter(**filters).update(**changes):
            return None
        return CallReservation.objects.create(
            request_id=request_id,
            owner_id=GroupRequest.objects.filter(pk=request_id)
            .values_list("group__owner_id", flat=True)
            .first(),
            purpose=purpose,
            agent_id=agent_id,
            fence=fence or 0,
            attempt=attempt,
        )


def _reserve_in_one_statement(
    *, request_id: int, purpose: str, agent_id: int, fence: int | None, attempt: int, at: datetime
) -> CallReservation | None:
    """PostgreSQL: the same conditional UPDATE and the audit row's INSERT as one statement
    (a data-modifying CTE), atomic on its own: one round trip where the transaction takes four.
    The INSERT sees one row from the UPDATE or none, so no row is written when it matched none.
    """
    counter, limit, state = _COUNTERS[purpose]
    where, params = [f'"{counter}" < %s', '"id" = %s'], [limit, request_id]
    sets, set_params = [f'"{counter}" = "{counter}" + 1'], []
    if state is not None:
        where.append('"state" = %s')
        params.append(state)
    if fence is not None:
        where.append('"fence" = %s')
        params.append(fence)
        sets.append('"working_agent_id" = %s, "working_since" = %s, "working_fence" = %s')
        set_params += [agent_id, at, fence]
    row = CallReservation(
        request_id=request_id,
        purpose=purpose,
        agent_id=agent_id,
        fence=fence or 0,
        attempt=attempt,
        status=CallReservation.Status.RESERVED,
        created_at=at,
    )
    requests, reservations = GroupRequest._meta.db_table, CallReservation._meta.db_table
    groups = GroupRequest._meta.get_field("group").related_model._meta.db_table
    # The owner is read from the request's group in the same statement (the audit row keeps it
    # when the request is cleared away).
    sql = (
        f'WITH counted AS (UPDATE "{requests}" SET {", ".join(sets)} '
        f'WHERE {" AND ".join(where)} RETURNING "id", "group_id") '
        f'INSERT INTO "{reservations}" ("request_id", "owner_id", "purpose", "agent_id", "fence", '
        f'"attempt", "status", "reason", "created_at", "provider", "model", "input_tokens", '
        f'"output_tokens") SELECT counted."id", g."owner_id", %s, %s, %s, %s, %s, %s, %s, %s, '
        f'%s, %s, %s FROM counted JOIN "{groups}" g ON g."id" = counted."group_id" '
        f'RETURNING "id"'
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [
                *set_params,
                *params,
                row.purpose,
                row.agent_id,
                row.fence,
                row.attempt,
                row.status,
                row.reason,
                row.created_at,
                # What the call was and took is recorded when its reply is.
                row.provider,
                row.model,
                row.input_tokens,
                row.output_tokens,
            ],
        )
        found = cursor.fetchone()
    if found is None:
        return None
    row.pk = found[0]
    return row


def release_call(*, reservation: CallReservation, reason: str) -> None:
    """Give a call back: only after a rejection the provider confirmed before doing any work."""
    counter = _COUNTERS[reservation.purpose][0]
    with transaction.atomic():
        updated = CallReservation.objects.filter(
            pk=reservation.pk, status=CallReservation.Status.RESERVED
        ).update(status=CallReservation.Status.RELEASED, reason=reason, finished_at=timezone.now())
        if updated:
            GroupRequest.objects.filter(pk=reservation.request_id, **{f"{counter}__gt": 0}).update(
                **{counter: F(counter) - 1}
            )


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


def settle_lost_reservations(*, request_id: int, below_fence: int) -> int:
    """Mark reservations of steps that never finished (a crash) as consumed: still counted."""
    return CallReservation.objects.filter(
        request_id=request_id, status=CallReservation.Status.RESERVED, fence__lt=below_fence
    ).update(
        status=CallReservation.Status.CONSUMED,
        reason="ambiguous: step lost",
        finished_at=timezone.now(),
    )


def settle_failed_call(*, reservation: CallReservation, failure: ProviderError) -> None:
    """Count a failed call as the seed says: given back after a confirmed rejection or a
    configuration error (nothing was sent, or nothing done); kept for anything ambiguous."""
    if isinstance(failure, (ConfirmedRejection, ProviderConfigError)):
        release_call(reservation=reservation, reason=failure.code)
    else:
        consume_call(reservation=reservation, reason=failure.code)
