"""Row locks of the group loop, in one place and one order: group, then its agents, then
request(s), then approvals, then conversation. Every function expects an open transaction and
takes only the rows of its own table (``of=("self",)``), so a joined filter never locks a
neighbour.

Whoever needs two of these takes them in this order; the owner's quota lock
(garden/quotas.py), when taken, comes last.

Every lock is ``FOR NO KEY UPDATE``, never ``FOR UPDATE``: nothing here changes a row's key.
Django's foreign keys are checked at COMMIT (``DEFERRABLE INITIALLY DEFERRED``), and a check
takes ``FOR KEY SHARE`` on the row referred to — after every other lock of its transaction, so
out of any order. A step that updates its request row twice (its token counts, then its turns)
has its request's group checked at its COMMIT; against ``FOR UPDATE`` on that group, held by a
post waiting for the step's conversation row, that was a deadlock. ``FOR NO KEY UPDATE``
still serialises the services that lock a row, and lets every foreign-key check through."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import F
from django.utils import timezone

from garden.models import Agent, Approval, Conversation, ModelAccount
from garden.pricing import PricedCall
from groups.models import CallReservation, Group, GroupRequest, Membership


def lock_group(
    group_id: int, *, owner_id: int | None = None, live: bool = False, skip_locked: bool = False
) -> Group | None:
    """The group row, FOR NO KEY UPDATE; None when it is gone (or not ``owner_id``'s, or — with
    ``live`` — deleted). ``skip_locked`` gives None instead of waiting for another holder."""
    rows = Group.objects.select_for_update(
        of=("self",), no_key=True, skip_locked=skip_locked
    ).filter(pk=group_id)
    if owner_id is not None:
        rows = rows.filter(owner_id=owner_id)
    if live:
        rows = rows.filter(deleted_at__isnull=True)
    return rows.first()


def lock_agents(agent_ids: Iterable[int]) -> list[Agent]:
    """The agents named, in id order (so two changes never wait on each other crosswise)."""
    return list(
        Agent.objects.select_for_update(of=("self",), no_key=True)
        .filter(pk__in=agent_ids)
        .order_by("pk")
    )


def lock_group_requests(
    group_id: int, *, states: Sequence[str], limit: int | None = None
) -> list[GroupRequest]:
    """The group's requests in ``states`` (the ``limit`` oldest), oldest first. Caller holds
    the group row."""
    rows = (
        GroupRequest.objects.select_for_update(of=("self",), no_key=True)
        .filter(group_id=group_id, state__in=states)
        .order_by("id")
    )
    return list(rows[:limit] if limit else rows)


def lock_request(request_id: int) -> GroupRequest | None:
    """One request row. Caller holds its group row, unless it is a step (which changes
    nothing group-wide and so takes the request alone)."""
    return (
        GroupRequest.objects.select_for_update(of=("self",), no_key=True)
        .filter(pk=request_id)
        .first()
    )


def lock_request_values(
    request_id: int,
    *fields: str,
    consume: int | None = None,
    call: PricedCall | None = None,
) -> tuple | None:
    """A step's re-check: ``fields`` of the request row, read under FOR NO KEY UPDATE. ``consume``
    names a reservation to mark consumed in the same transaction (on PostgreSQL, in the same
    statement: one round trip for the lock and the count), recording ``call`` on it (provider,
    model, tokens, cost). ``call``'s tokens and cost (or, with no price, one unpriced call) are
    added to the request's in the statement that locks the row, and the values read are those
    after it. The values come back as the database gives them: ask only for integer, text
    and decimal fields."""
    counts = call is not None and bool(call.input_tokens or call.output_tokens or call.cost != 0)
    if consume is not None and connection.vendor == "postgresql":
        reservations, requests = CallReservation._meta.db_table, GroupRequest._meta.db_table
        columns = ", ".join(f'"{GroupRequest._meta.get_field(f).column}"' for f in fields)
        # The row is locked by the UPDATE that counts the call when there is anything to
        # count (it returns the row as it then is), else by FOR NO KEY UPDATE.
        read = (
            f'UPDATE "{requests}" SET "input_tokens" = "input_tokens" + %s, '
            f'"output_tokens" = "output_tokens" + %s, "cost" = "cost" + %s, '
            f'"unpriced_calls" = "unpriced_calls" + %s WHERE "id" = %s RETURNING {columns}'
            if counts
            else f'SELECT {columns} FROM "{requests}" WHERE "id" = %s FOR NO KEY UPDATE'
        )
        recorded = "".join(f', "{name}" = %s' for name in (call.recorded() if call else ()))
        sql = (
            f'WITH consumed AS (UPDATE "{reservations}" SET "status" = %s, "reason" = %s, '
            f'"finished_at" = %s{recorded} WHERE "id" = %s AND "status" = %s) {read}'
        )
        params: list[Any] = [CallReservation.Status.CONSUMED, "", timezone.now()]
        if call is not None:
            params += list(call.recorded().values())
        params += [consume, CallReservation.Status.RESERVED]
        if counts:
            params += [*_request_counts(call)]
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, request_id])
            return cursor.fetchone()
    if consume is not None:
        recorded = call.recorded() if call is not None else {}
        CallReservation.objects.filter(pk=consume, status=CallReservation.Status.RESERVED).update(
            status=CallReservation.Status.CONSUMED,
            reason="",
            finished_at=timezone.now(),
            **recorded,
        )
    if counts:
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


def lock_group_and_request(
    group_id: int | None, request_id: int | None
) -> tuple[Group | None, GroupRequest | None]:
    """Group, then request — the order every service that holds both keeps."""
    group = lock_group(group_id) if group_id else None
    request = lock_request(request_id) if request_id else None
    return group, request


def lock_pending_approvals(request_id: int) -> list[Approval]:
    """The request's undecided approvals. Caller holds the group and request rows."""
    return list(
        Approval.objects.select_for_update(of=("self",), no_key=True)
        .select_related("agent")
        .filter(request_id=request_id, status=Approval.Status.PENDING)
        .order_by("id")
    )


def lock_approval(approval_id: int) -> Approval | None:
    """One approval. Caller holds its request's group and request rows first, if any."""
    return (
        Approval.objects.select_for_update(of=("self",), no_key=True)
        .select_related("agent")
        .filter(pk=approval_id)
        .first()
    )


def lock_conversation(conversation_id: int) -> Conversation | None:
    """A thread's row, last. Caller holds its group row."""
    return (
        Conversation.objects.select_for_update(of=("self",), no_key=True)
        .filter(pk=conversation_id)
        .first()
    )


@dataclass(frozen=True)
class Claim:
    """What a step's claim returns: the request and its group as they are after the claim,
    a stamp of the group's roster (every member's membership, agent and model-account row
    version: any change to any of them changes it) and the last seq of the request's
    thread (every turn up to it is committed)."""

    request: GroupRequest
    group: Group
    roster_stamp: str
    thread_last_seq: int


def tool_wait_cutoff() -> datetime:
    """A step waiting for a tool slot (``waiting_for`` tools_in_flight) keeps the fence it
    claimed without holding the group's lock: it is live, not lost, while it has touched its
    row within the sweeper's delay (groups/tool_use.py keep_from_sweeper sees to that), so its
    fence is not claimed again before then. Older, its continuation was lost: reclaimed."""
    return timezone.now() - timedelta(seconds=settings.GARDEN_SWEEP_AFTER_SECONDS)


def claim_fence(*, request_id: int, fence: int, group_id: int) -> Claim | None:
    """PostgreSQL: a step's claim and its first read in one statement. Moves the fence of a
    steppable request of ``group_id`` from ``fence`` to ``fence + 1`` — or, when a step claimed
    ``fence + 1`` and never completed it (its worker died), to ``fence + 2`` — and returns the
    request and its group as they are after the claim; None when nothing could be claimed.
    Autocommit: the row lock lasts the statement."""
    request_columns = [f.column for f in GroupRequest._meta.concrete_fields]
    group_columns = [f.column for f in Group._meta.concrete_fields]
    requests, groups = GroupRequest._meta.db_table, Group._meta.db_table
    steppable = list(GroupRequest.STEPPABLE_STATES)
    sql = (
        f'WITH claimed AS (UPDATE "{requests}" SET "fence" = CASE WHEN "fence" = %s '
        f'THEN %s ELSE %s END, "updated_at" = %s WHERE "id" = %s AND "group_id" = %s '
        f'AND "state" = ANY(%s) AND ("fence" = %s OR ("fence" = %s AND "completed_fence" < %s '
        f'AND NOT ("waiting_for" = %s AND "updated_at" > %s))) '
        f"RETURNING {', '.join(f'{chr(34)}{c}{chr(34)}' for c in request_columns)}) "
        f"SELECT {', '.join(f'claimed.{chr(34)}{c}{chr(34)}' for c in request_columns)}, "
        f"{', '.join(f'g.{chr(34)}{c}{chr(34)}' for c in group_columns)}, "
        f"({_ROSTER_STAMP}), ({_THREAD_LAST_SEQ}) "
        f'FROM claimed JOIN "{groups}" g ON g."id" = claimed."group_id"'
    )
    params = [fence, fence + 1, fence + 2, timezone.now(), request_id, group_id, steppable]
    params += [fence, fence + 1, fence + 1, GroupRequest.WAITING_FOR_TOOL_SLOT, tool_wait_cutoff()]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(request_columns)
    return Claim(
        request=_from_row(GroupRequest, row[:split]),
        group=_from_row(Group, row[split:-2]),
        roster_stamp=row[-2] or "",
        thread_last_seq=row[-1] or 0,
    )


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
