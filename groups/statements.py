"""The group loop's critical writes, each written twice side by side: its ORM reference (the
meaning, run on every database that is not PostgreSQL) and a hand-built PostgreSQL statement
that writes the same rows and refuses the same cases in one round trip. ``_fast`` is the one
place that chooses; tests/groups/test_statements.py runs both paths against the same rows."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from garden.models import Agent, Conversation, Message, ModelAccount
from garden.pricing import PricedCall
from garden.statements import RowUpdate, insert_turns_orm, turns_insert_ctes, turns_written
from groups.models import (
    MAINTENANCE_CALLS,
    SYNTHESIS_CALLS,
    WORKING_CALLS,
    CallReservation,
    Group,
    GroupRequest,
    Membership,
)

# Per purpose: the request row's counter, its limit, and the state that may spend it (None:
# any state; rollover's maintenance call is counted apart from the twelve).
_Purpose, _State = CallReservation.Purpose, GroupRequest.State
BUDGET_COUNTERS: dict[str, tuple[str, int, str | None]] = {
    _Purpose.WORKING: ("working_reserved", WORKING_CALLS, _State.RUNNING),
    _Purpose.SYNTHESIS: ("synthesis_reserved", SYNTHESIS_CALLS, _State.SYNTHESIZING),
    _Purpose.MAINTENANCE: ("maintenance_reserved", MAINTENANCE_CALLS, None),
}

# The reservation's fields the fast path's INSERT names; every other concrete field is left to
# the database (the id) or is written when the call ends (cost, finished_at). A field added to
# CallReservation belongs in one of the two (tests/groups/test_statements.py checks).
RESERVATION_INSERTED = (
    *("request", "owner", "purpose", "agent", "fence", "attempt", "status", "reason"),
    *("created_at", "provider", "model", "input_tokens", "output_tokens"),
)
RESERVATION_LEFT_OUT = ("id", "cost", "finished_at")
# Where the fast path's INSERT takes a field from the statement itself, not a parameter.
_SOURCES = {"request": 'counted."id"', "owner": 'g."owner_id"'}


def _fast() -> bool:
    """The one dispatch point: the hand-built statements run on PostgreSQL only."""
    return connection.vendor == "postgresql"


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


# -- the step's claim ------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """What a step's claim returns: the request and its group as they are after the claim,
    a stamp of the group's roster (every member's membership, agent and model-account row
    version: any change to any of them changes it; "" when the path cannot stamp it, so the
    roster is read afresh) and the last seq of the request's thread (every turn up to it is
    committed)."""

    request: GroupRequest
    group: Group
    roster_stamp: str
    thread_last_seq: int
    # The step's call, reserved ahead by the write that claimed its fence (record_step).
    reservation: CallReservation | None = None


def tool_wait_cutoff() -> datetime:
    """A step waiting for a tool slot (``waiting_for`` tools_in_flight) keeps the fence it
    claimed without holding the group's lock: it is live, not lost, while it has touched its
    row within the sweeper's delay (groups/loop/tool_calls.py keep_from_sweeper sees to that),
    so its fence is not claimed again before then. Older, its continuation was lost: reclaimed."""
    return timezone.now() - timedelta(seconds=settings.GARDEN_SWEEP_AFTER_SECONDS)


# What a takeover writes on the reservations it finds still reserved below the fence it claims:
# their step never finished, and its call may have gone out, so each stays counted.
LOST_STEP = "ambiguous: step lost"


def claim_fence(*, request_id: int, fence: int, group_id: int) -> Claim | None:
    """A step's claim: moves the fence of a steppable request of ``group_id`` from ``fence`` to
    ``fence + 1`` — or, when a step claimed ``fence + 1`` and never completed it (its worker
    died) and is not waiting for a tool slot, to ``fence + 2`` — touching ``updated_at``, and
    returns the request and its group as they are after it. Refuses (None, nothing written) a
    stale or duplicate delivery, a request that is not steppable, or a wrong group.

    A claim of ``fence + 2`` (a takeover) settles, in the same write, the reservations still
    reserved below it (the lost step's, ``LOST_STEP``: consumed, still counted): a worker
    that dies or stops right after its claim leaves no reservation of a step it shut out
    reserved, as it would if the claim and the settling were two writes."""
    if _fast():
        return claim_fence_pg(request_id=request_id, fence=fence, group_id=group_id)
    return claim_fence_orm(request_id=request_id, fence=fence, group_id=group_id)


def claim_fence_orm(*, request_id: int, fence: int, group_id: int) -> Claim | None:
    """The reference: two conditional UPDATEs (the next fence, else the lost one), then the
    rows read back. No roster stamp: the room reads its roster."""
    now = timezone.now()
    live = GroupRequest.objects.filter(
        pk=request_id, group_id=group_id, state__in=GroupRequest.STEPPABLE_STATES
    )
    with transaction.atomic():
        if not live.filter(fence=fence).update(fence=fence + 1, updated_at=now):
            lost = live.filter(fence=fence + 1, completed_fence__lt=fence + 1).exclude(
                waiting_for=GroupRequest.WAITING_FOR_TOOL_SLOT, updated_at__gt=tool_wait_cutoff()
            )
            if not lost.update(fence=fence + 2, updated_at=now):
                return None
            CallReservation.objects.filter(
                request_id=request_id, status=CallReservation.Status.RESERVED, fence__lt=fence + 2
            ).update(status=CallReservation.Status.CONSUMED, reason=LOST_STEP, finished_at=now)
    request = GroupRequest.objects.select_related("group").get(pk=request_id)
    last_seq = (
        Conversation.objects.filter(pk=request.conversation_id)
        .values_list("last_seq", flat=True)
        .first()
    )
    return Claim(
        request=request, group=request.group, roster_stamp="", thread_last_seq=last_seq or 0
    )


def claim_fence_pg(*, request_id: int, fence: int, group_id: int) -> Claim | None:
    """PostgreSQL: the claim, a takeover's settling of the lost step's reservations, and the
    step's first read in one statement (autocommit: the row lock lasts the statement), with
    the roster's stamp and the thread's last seq. Every concrete column of both rows comes
    back, so a field added to either is carried."""
    sql, split = _claim_shape()
    steppable = list(GroupRequest.STEPPABLE_STATES)
    now = timezone.now()
    params = [fence, fence + 1, fence + 2, now, request_id, group_id, steppable]
    params += [fence, fence + 1, fence + 1, GroupRequest.WAITING_FOR_TOOL_SLOT, tool_wait_cutoff()]
    params += [CallReservation.Status.CONSUMED, LOST_STEP, now, request_id]
    params += [CallReservation.Status.RESERVED, fence + 2, fence + 2]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    return Claim(
        request=_from_row(GroupRequest, row[:split]),
        group=_from_row(Group, row[split:-2]),
        roster_stamp=row[-2] or "",
        thread_last_seq=row[-1] or 0,
    )


@functools.cache
def _claim_shape() -> tuple[str, int]:
    """The claim's statement and how many of its columns are the request's, built once per
    process."""
    request_columns = [f.column for f in GroupRequest._meta.concrete_fields]
    group_columns = [f.column for f in Group._meta.concrete_fields]
    sql = (
        f"WITH claimed AS (UPDATE {_q(GroupRequest._meta.db_table)} SET "
        f'"fence" = CASE WHEN "fence" = %s THEN %s ELSE %s END, "updated_at" = %s '
        f'WHERE "id" = %s AND "group_id" = %s AND "state" = ANY(%s) AND ("fence" = %s OR '
        f'("fence" = %s AND "completed_fence" < %s AND NOT ("waiting_for" = %s AND '
        f'"updated_at" > %s))) RETURNING {", ".join(_q(c) for c in request_columns)}), '
        # A takeover (the fence moved two) settles the lost step's reservations with it.
        f"settled AS (UPDATE {_q(CallReservation._meta.db_table)} SET "
        f'"status" = %s, "reason" = %s, "finished_at" = %s WHERE "request_id" = %s AND '
        f'"status" = %s AND "fence" < %s AND EXISTS (SELECT 1 FROM claimed WHERE '
        f'claimed."fence" = %s)) '
        f"SELECT {', '.join(f'claimed.{_q(c)}' for c in request_columns)}, "
        f"{', '.join(f'g.{_q(c)}' for c in group_columns)}, "
        f"({_ROSTER_STAMP}), ({_THREAD_LAST_SEQ}) "
        f'FROM claimed JOIN {_q(Group._meta.db_table)} g ON g."id" = claimed."group_id"'
    )
    return sql, len(request_columns)


# The roster's stamp: each row's id and xmin (the transaction that wrote its current version,
# so any UPDATE changes it, even one that puts back an earlier value) for the group's
# memberships, their agents and the agents' model accounts, and the coordinator.
_ROSTER_STAMP = (
    "SELECT md5(string_agg(concat_ws(':', coalesce(m.id::text, '-'), coalesce(m.xmin::text, "
    "'-'), a.id, a.xmin, coalesce(ma.id::text, '-'), coalesce(ma.xmin::text, '-')), ',' "
    "ORDER BY m.position, m.id, a.id)) "
    f'FROM "{Agent._meta.db_table}" a '
    f'LEFT JOIN "{Membership._meta.db_table}" m ON m.agent_id = a.id AND m.group_id = g.id '
    f'LEFT JOIN "{ModelAccount._meta.db_table}" ma ON ma.id = a.model_account_id '
    f"WHERE a.id = g.coordinator_id OR a.id IN "
    f'(SELECT agent_id FROM "{Membership._meta.db_table}" WHERE group_id = g.id)'
)
_THREAD_LAST_SEQ = (
    f'SELECT c.last_seq FROM "{Conversation._meta.db_table}" c WHERE c.id = claimed.conversation_id'
)


def _from_row(model, values) -> Any:
    """A model instance from its concrete columns, converted as the ORM would."""
    fields = model._meta.concrete_fields
    converted = []
    for field, value in zip(fields, values, strict=True):
        for converter in field.get_db_converters(connection):
            value = converter(value, field, connection)
        converted.append(value)
    return model.from_db(connection.alias, [f.attname for f in fields], converted)


# -- the reservation -------------------------------------------------------------------------


def reserve(
    *,
    request_id: int,
    purpose: str,
    agent_id: int,
    fence: int | None,
    attempt: int,
    at: datetime,
) -> CallReservation | None:
    """One call of ``purpose`` counted on the request row (below its limit, in the state that
    may spend it and, for a step's call, at ``fence``, naming ``agent_id`` the working agent
    since ``at``) and its audit row written with the owner of the request's group, atomically.
    Refuses (None, nothing written) a spent budget, a wrong state or a moved fence."""
    path = reserve_pg if _fast() else reserve_orm
    return path(
        request_id=request_id,
        purpose=purpose,
        agent_id=agent_id,
        fence=fence,
        attempt=attempt,
        at=at,
    )


def reserve_orm(
    *, request_id: int, purpose: str, agent_id: int, fence: int | None, attempt: int, at: datetime
) -> CallReservation | None:
    """The reference: the conditional UPDATE, its rowcount deciding, then the audit row's
    INSERT, in one transaction."""
    counter, limit, state = BUDGET_COUNTERS[purpose]
    filters: dict[str, Any] = {"pk": request_id, f"{counter}__lt": limit}
    if state is not None:
        filters["state"] = state
    changes: dict[str, Any] = {counter: F(counter) + 1}
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


@functools.cache
def _reserve_shape(purpose: str, fenced: bool) -> tuple[str, list]:
    """The reservation's statement for ``purpose`` (``fenced``: a step's, at a fence) and the
    fields whose values are its parameters, built once per process."""
    counter, _, state = BUDGET_COUNTERS[purpose]
    where = [f"{_q(counter)} < %s", '"id" = %s']
    sets = [f"{_q(counter)} = {_q(counter)} + 1"]
    if state is not None:
        where.append('"state" = %s')
    if fenced:
        where.append('"fence" = %s')
        sets.append('"working_agent_id" = %s, "working_since" = %s, "working_fence" = %s')
    fields = [CallReservation._meta.get_field(name) for name in RESERVATION_INSERTED]
    # The request and the owner come from the UPDATE and the group; the rest from the row.
    values = [f for f in fields if f.name not in _SOURCES]
    sql = (
        f"WITH counted AS (UPDATE {_q(GroupRequest._meta.db_table)} SET {', '.join(sets)} "
        f'WHERE {" AND ".join(where)} RETURNING "id", "group_id") '
        f"INSERT INTO {_q(CallReservation._meta.db_table)} "
        f"({', '.join(_q(f.column) for f in fields)}) "
        f"SELECT {', '.join(_SOURCES.get(f.name, '%s') for f in fields)} "
        f'FROM counted JOIN {_q(Group._meta.db_table)} g ON g."id" = counted."group_id" '
        f'RETURNING "id", "request_id", "owner_id"'
    )
    return sql, values


def reserve_pg(
    *, request_id: int, purpose: str, agent_id: int, fence: int | None, attempt: int, at: datetime
) -> CallReservation | None:
    """PostgreSQL: the same conditional UPDATE and the audit row's INSERT as one statement (a
    data-modifying CTE), atomic on its own: one round trip where the transaction takes four.
    The INSERT sees one row from the UPDATE or none, so no row is written when it matched
    none. The owner is read from the request's group in the same statement."""
    _, limit, state = BUDGET_COUNTERS[purpose]
    params: list[Any] = [limit, request_id]
    set_params: list[Any] = []
    if state is not None:
        params.append(state)
    if fence is not None:
        params.append(fence)
        set_params += [agent_id, at, fence]
    row = CallReservation(
        purpose=purpose,
        agent_id=agent_id,
        fence=fence or 0,
        attempt=attempt,
        status=CallReservation.Status.RESERVED,
        created_at=at,
    )
    sql, values = _reserve_shape(purpose, fence is not None)
    row_params = [f.get_db_prep_save(getattr(row, f.attname), connection) for f in values]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*set_params, *params, *row_params])
        found = cursor.fetchone()
    if found is None:
        return None
    row.pk, row.request_id, row.owner_id = found
    row._state.adding, row._state.db = False, connection.alias
    return row


# -- a step's re-check: consume its reservation and count its call -------------------------


def consume_and_count(
    request_id: int,
    fields: tuple[str, ...],
    *,
    consume: int | None = None,
    call: PricedCall | None = None,
) -> tuple | None:
    """A step's re-check: marks reservation ``consume`` consumed (only while it is reserved),
    recording ``call`` on it (provider, model, tokens, cost); adds ``call``'s tokens and cost
    (or, with no price, one unpriced call) to the request's; and returns ``fields`` of the
    request row as they are after it, read under FOR NO KEY UPDATE (None: no such request).
    The caller holds a transaction. Values come back as the database gives them: ask only for
    integer, text and decimal fields. With nothing to consume there is no fast path."""
    if consume is not None and _fast():
        return consume_and_count_pg(request_id, fields, consume=consume, call=call)
    return consume_and_count_orm(request_id, fields, consume=consume, call=call)


def consume_and_count_orm(
    request_id: int,
    fields: tuple[str, ...],
    *,
    consume: int | None = None,
    call: PricedCall | None = None,
) -> tuple | None:
    """The reference: the reservation's UPDATE, the request's counting UPDATE, the locking
    read."""
    if consume is not None:
        recorded = call.recorded() if call is not None else {}
        CallReservation.objects.filter(pk=consume, status=CallReservation.Status.RESERVED).update(
            status=CallReservation.Status.CONSUMED,
            reason="",
            finished_at=timezone.now(),
            **recorded,
        )
    if _counts(call):
        input_tokens, output_tokens, cost, unpriced = _request_counts(call)
        GroupRequest.objects.filter(pk=request_id).update(
            input_tokens=F("input_tokens") + input_tokens,
            output_tokens=F("output_tokens") + output_tokens,
            cost=F("cost") + cost,
            unpriced_calls=F("unpriced_calls") + unpriced,
        )
    return (
        GroupRequest.objects.select_for_update(of=("self",), no_key=True)
        .filter(pk=request_id)
        .values_list(*fields)
        .first()
    )


@functools.cache
def _consume_shape(fields: tuple[str, ...], recorded: tuple[str, ...], counts: bool) -> str:
    """The re-check's statement for these ``fields``, ``recorded`` call fields and whether it
    counts a call, built once per process."""
    requests = _q(GroupRequest._meta.db_table)
    columns = ", ".join(_q(GroupRequest._meta.get_field(f).column) for f in fields)
    read = (
        f'UPDATE {requests} SET "input_tokens" = "input_tokens" + %s, '
        f'"output_tokens" = "output_tokens" + %s, "cost" = "cost" + %s, '
        f'"unpriced_calls" = "unpriced_calls" + %s WHERE "id" = %s RETURNING {columns}'
        if counts
        else f'SELECT {columns} FROM {requests} WHERE "id" = %s FOR NO KEY UPDATE'
    )
    recorded_sql = "".join(
        f", {_q(CallReservation._meta.get_field(name).column)} = %s" for name in recorded
    )
    return (
        f"WITH consumed AS (UPDATE {_q(CallReservation._meta.db_table)} SET "
        f'"status" = %s, "reason" = %s, "finished_at" = %s{recorded_sql} '
        f'WHERE "id" = %s AND "status" = %s) {read}'
    )


def consume_and_count_pg(
    request_id: int, fields: tuple[str, ...], *, consume: int, call: PricedCall | None = None
) -> tuple | None:
    """PostgreSQL: the same in one statement, lock and count together. The row is locked by
    the UPDATE that counts the call when there is anything to count (it returns the row as it
    then is), else by FOR NO KEY UPDATE."""
    counts = _counts(call)
    recorded = call.recorded() if call is not None else {}
    sql = _consume_shape(fields, tuple(recorded), counts)
    params: list[Any] = [CallReservation.Status.CONSUMED, "", timezone.now()]
    params += list(recorded.values())
    params += [consume, CallReservation.Status.RESERVED]
    if counts:
        params += [*_request_counts(call)]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, request_id])
        return cursor.fetchone()


def _counts(call: PricedCall | None) -> bool:
    """Whether ``call`` adds anything to its request (tokens, a cost, or an unpriced call)."""
    return call is not None and bool(call.input_tokens or call.output_tokens or call.cost != 0)


def _request_counts(call: PricedCall) -> tuple[int, int, Decimal, int]:
    """What ``call`` adds to its request: its tokens, its cost, and one unpriced call when
    its model has no price."""
    unpriced = call.cost is None
    return (
        call.input_tokens,
        call.output_tokens,
        Decimal(0) if unpriced else call.cost,
        int(unpriced),
    )


# -- a step's whole write in steady state ----------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    """What ``record_step`` returns: ``fields`` of the request row as the write left them
    (the call counted) and, when it claimed the next step's fence too, that step's claim (as
    ``claim_fence`` would have returned it)."""

    values: tuple
    claim: Claim | None


@dataclass(frozen=True)
class StepRecord:
    """A step's whole write, when all it records is turns and its request's row: while the
    request is steppable at ``fence``, reservation ``consume`` marked consumed (only while it
    is reserved) with ``call`` recorded on it, ``call``'s tokens and cost added to the
    request's, ``messages`` (at least one, all of the request's thread, adding ``stored``
    bytes to it) written under the thread's next seqs, the request row updated by ``update``
    and, with ``claim_next``, its fence moved on to ``fence + 1``: the claim of the step that
    follows, which then need not make one. ``fields``: the request's fields to return."""

    request_id: int
    fence: int
    update: RowUpdate
    messages: list[Message]
    stored: int
    consume: int | None
    call: PricedCall | None
    fields: tuple[str, ...]
    claim_next: bool
    # With ``claim_next``: the next step's call, reserved in the same write when its budget
    # allows (as ``reserve`` would at the next fence): its purpose, agent and time.
    reserve_next: NextCall | None = None


@dataclass(frozen=True)
class NextCall:
    """The call a step's write reserves for the step after it."""

    purpose: str
    agent_id: int
    at: datetime


def record_step(record: StepRecord) -> Recorded | None:
    """Write ``record`` (see StepRecord), or refuse (None, nothing written) a moved fence or a
    request no longer steppable. On PostgreSQL one statement; elsewhere its ORM reference in
    one transaction."""
    if not record.messages:
        raise ValueError("a step's record writes at least one turn")
    if record.reserve_next is not None and not record.claim_next:
        raise ValueError("only a record that claims the next fence reserves its call")
    return record_step_pg(record) if _fast() else record_step_orm(record)


def record_step_orm(record: StepRecord) -> Recorded | None:
    """The reference: the re-check under the row lock (``consume_and_count_orm``), then the
    request's UPDATE, the turns, and the claim's rows read back."""
    messages, fence = record.messages, record.fence
    with transaction.atomic():
        current = consume_and_count_orm(
            record.request_id,
            ("fence", "state", *record.fields),
            consume=record.consume,
            call=record.call,
        )
        if (
            current is None
            or current[0] != fence
            or current[1] not in GroupRequest.STEPPABLE_STATES
        ):
            transaction.set_rollback(True)
            return None
        meta = GroupRequest._meta
        changes = {
            meta.get_field(name).attname: value for name, value in record.update.values.items()
        }
        if record.claim_next:
            changes["fence"] = fence + 1
        GroupRequest.objects.filter(pk=record.request_id).update(**changes)
        insert_turns_orm(
            conversation_id=messages[0].conversation_id, messages=messages, stored=record.stored
        )
        claim = None
        if record.claim_next:
            reservation = None
            if record.reserve_next is not None:
                call = record.reserve_next
                reservation = reserve_orm(
                    request_id=record.request_id,
                    purpose=call.purpose,
                    agent_id=call.agent_id,
                    fence=fence + 1,
                    attempt=1,
                    at=call.at,
                )
            request = GroupRequest.objects.select_related("group").get(pk=record.request_id)
            claim = Claim(
                request=request,
                group=request.group,
                roster_stamp="",
                thread_last_seq=messages[-1].seq,
                reservation=reservation,
            )
            # As the write left them: the next call counted.
            current = (*current[:2], *(getattr(request, name) for name in record.fields))
    return Recorded(values=tuple(current[2:]), claim=claim)


def record_step_pg(record: StepRecord) -> Recorded | None:
    """PostgreSQL: one statement. The request's UPDATE checks the fence and the state, counts
    the call and takes the row's lock (as FOR NO KEY UPDATE does; a concurrent writer's
    change is re-checked under it); the reservation's UPDATE and the turns' CTEs write only
    when it matched; the request and its group come back with the roster's stamp and the
    thread's last seq."""
    meta = GroupRequest._meta
    call, consume = record.call, record.consume
    recorded = call.recorded() if call is not None else {}
    following = record.reserve_next
    new_state = record.update.values.get("state")
    sql, split = _record_shape(
        tuple(record.update.values),
        tuple(recorded),
        consume is not None,
        record.claim_next,
        following.purpose if following else "",
    )
    turns = turns_insert_ctes(
        conversation_id=record.messages[0].conversation_id,
        messages=record.messages,
        stored=record.stored,
        only_after="req",
    )
    params: list[Any] = [
        meta.get_field(name).get_db_prep_save(value, connection)
        for name, value in record.update.values.items()
    ]
    params += list(_request_counts(call) if _counts(call) else (0, 0, Decimal(0), 0))
    reservation = None
    if following is not None:
        # The counter moves, and the row names the working agent, only below the limit.
        _, limit, state = BUDGET_COUNTERS[following.purpose]
        # The state the purpose needs, as the row will be (``reserve``'s condition): the
        # state the write sets, else the row's, which SET reads as it was.
        below = (
            [limit, state]
            if new_state is None
            else [limit, state if new_state == state else "", state]
        )
        params += [*below, *below, following.agent_id, *below, following.at, *below]
        reservation = CallReservation(
            purpose=following.purpose,
            agent_id=following.agent_id,
            fence=record.fence + 1,
            attempt=1,
            status=CallReservation.Status.RESERVED,
            created_at=following.at,
        )
    params += [record.request_id, record.fence, list(GroupRequest.STEPPABLE_STATES)]
    if consume is not None:
        params += [CallReservation.Status.CONSUMED, "", timezone.now()]
        params += list(recorded.values())
        params += [consume, CallReservation.Status.RESERVED]
    if reservation is not None:
        fields = [CallReservation._meta.get_field(name) for name in RESERVATION_INSERTED]
        params += [
            f.get_db_prep_save(getattr(reservation, f.attname), connection)
            for f in fields
            if f.name not in _RECORD_SOURCES
        ]
    with connection.cursor() as cursor:
        cursor.execute(sql % {"turns": turns.sql}, [*params, *turns.params])
        row = cursor.fetchone()
    if row is None:
        return None
    turns_written(record.messages, row[-1])
    request = _from_row(GroupRequest, row[:split])
    claim = None
    if record.claim_next:
        if reservation is not None:
            if row[-3] is None:
                reservation = None  # the budget of its purpose is spent
            else:
                reservation.pk, reservation.request_id = row[-3], request.pk
                reservation.owner_id = row[split + _GROUP_OWNER]
                reservation._state.adding, reservation._state.db = False, connection.alias
        claim = Claim(
            request=request,
            group=_from_row(Group, row[split:-4]),
            roster_stamp=row[-4] or "",
            thread_last_seq=row[-2],
            reservation=reservation,
        )
    return Recorded(values=tuple(getattr(request, name) for name in record.fields), claim=claim)


@functools.cache
def _record_shape(
    names: tuple[str, ...],
    recorded: tuple[str, ...],
    consumes: bool,
    claims: bool,
    reserves: str,
) -> tuple[str, int]:
    """The step record's statement (``%(turns)s`` the turns' CTEs) for these updated
    ``names``, ``recorded`` call fields, a reservation consumed or not and the next fence
    claimed or not; and how many of its columns are the request's. Built once per shape."""
    meta = GroupRequest._meta
    request_columns = [f.column for f in meta.concrete_fields]
    group_columns = [f.column for f in Group._meta.concrete_fields]
    sets = [f"{_q(meta.get_field(name).column)} = %s" for name in names]
    sets += [f"{_q(c)} = {_q(c)} + %s" for c in _COUNTED]
    if claims:
        sets.append('"fence" = "fence" + 1')
    if reserves:
        # SET reads the row as it was: below the limit, count the call and name its agent,
        # since when and at which fence (the next one); the row's new working fence equal
        # to its new fence then says the call was counted.
        counter = _q(BUDGET_COUNTERS[reserves][0])
        below = (
            f'{counter} < %s AND "state" = %s'
            if "state" not in names
            else f"{counter} < %s AND %s = %s"
        )
        sets += [
            f"{counter} = {counter} + CASE WHEN {below} THEN 1 ELSE 0 END",
            f'"working_agent_id" = CASE WHEN {below} THEN %s ELSE "working_agent_id" END',
            f'"working_since" = CASE WHEN {below} THEN %s ELSE "working_since" END',
            f'"working_fence" = CASE WHEN {below} THEN "fence" + 1 ELSE "working_fence" END',
        ]
    ctes = [
        f"req AS (UPDATE {_q(meta.db_table)} SET {', '.join(sets)} "
        f'WHERE "id" = %s AND "fence" = %s AND "state" = ANY(%s) '
        f"RETURNING {', '.join(_q(c) for c in request_columns)})"
    ]
    if consumes:
        recorded_sql = "".join(
            f", {_q(CallReservation._meta.get_field(name).column)} = %s" for name in recorded
        )
        ctes.append(
            f"consumed AS (UPDATE {_q(CallReservation._meta.db_table)} SET "
            f'"status" = %s, "reason" = %s, "finished_at" = %s{recorded_sql} '
            f'WHERE "id" = %s AND "status" = %s AND EXISTS (SELECT 1 FROM req))'
        )
    if reserves:
        fields = [CallReservation._meta.get_field(name) for name in RESERVATION_INSERTED]
        ctes.append(
            f"reserved AS (INSERT INTO {_q(CallReservation._meta.db_table)} "
            f"({', '.join(_q(f.column) for f in fields)}) "
            f"SELECT {', '.join(_RECORD_SOURCES.get(f.name, '%s') for f in fields)} "
            f'FROM req JOIN {_q(Group._meta.db_table)} rg ON rg."id" = req."group_id" '
            f'WHERE req."working_fence" = req."fence" RETURNING "id")'
        )
    claim_columns = ""
    if claims:
        claim_columns = f"{', '.join(f'g.{_q(c)}' for c in group_columns)}, ({_ROSTER_STAMP}), " + (
            '(SELECT "id" FROM reserved), ' if reserves else "NULL, "
        )
    sql = (
        f"WITH {', '.join(ctes)}, %(turns)s "
        f"SELECT {', '.join(f'req.{_q(c)}' for c in request_columns)}, {claim_columns}"
        f'(SELECT "last_seq" FROM taken), '
        f'(SELECT array_agg(ARRAY["id", "seq"]) FROM turns) '
        f'FROM req JOIN {_q(Group._meta.db_table)} g ON g."id" = req."group_id"'
    )
    # Every other % stays one once the turns are put in (``sql % {"turns": ...}``).
    return sql.replace("%", "%%").replace("%%(turns)s", "%(turns)s"), len(request_columns)


# Where the next call's reservation takes a field from the record's statement itself.
_RECORD_SOURCES = {"request": 'req."id"', "owner": 'rg."owner_id"'}
# The owner's column among the group's returned columns.
_GROUP_OWNER = [f.name for f in Group._meta.concrete_fields].index("owner")

# The request's counters a call adds to, in ``_request_counts``'s order.
_COUNTED = ("input_tokens", "output_tokens", "cost", "unpriced_calls")
