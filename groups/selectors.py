"""Reads of groups. Every selector takes the person (or the owner) and returns only the groups
they may reach: those of their workspaces (by role) and their own."""

from __future__ import annotations

import csv
import io
from collections.abc import Collection, Iterable
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import (
    Count,
    DecimalField,
    F,
    Min,
    Prefetch,
    Q,
    QuerySet,
    Sum,
    TextField,
    Value,
)
from django.db.models.functions import Cast, Coalesce, Length, TruncDate

from garden.errors import is_row_id
from garden.models import Agent, AttachmentData, Conversation, MemoryNote, Message
from garden.pricing import PLACES
from garden.selectors import workspaces_where
from groups.models import (
    Approval,
    CallReservation,
    Group,
    GroupRequest,
    Membership,
    WebhookDelivery,
    WebhookEndpoint,
)

# At most this many turns per page of a room's transcript.
ROOM_PAGE = 500


def _with_members(qs: QuerySet[Group]) -> QuerySet[Group]:
    ordered = Membership.objects.select_related("agent").order_by("position", "id")
    return qs.select_related("coordinator", "owner").prefetch_related(
        Prefetch("memberships", queryset=ordered, to_attr="ordered_memberships")
    )


def groups_reachable(*, person: AbstractBaseUser, right: str = "read") -> QuerySet[Group]:
    """The groups ``person`` has ``right`` in (garden.selectors.WORKSPACE_RIGHTS): those of
    the workspaces they are in with that right, and — outside any workspace — their own."""
    return Group.objects.filter(
        Q(workspace__in=workspaces_where(user=person, right=right))
        | Q(workspace__isnull=True, owner=person)
    )


def group_may(person: AbstractBaseUser, group: Group, right: str) -> bool:
    """Whether ``person`` has ``right`` in ``group`` (see ``groups_reachable``)."""
    return groups_reachable(person=person, right=right).filter(pk=group.pk).exists()


def group_list(*, person: AbstractBaseUser) -> QuerySet[Group]:
    """The person's roster: the groups of their workspaces, neither deleted nor archived."""
    return _with_members(
        groups_reachable(person=person).filter(
            kind=Group.Kind.TEAM, deleted_at__isnull=True, archived_at__isnull=True
        )
    )


def group_get(*, person: AbstractBaseUser, group_id: int, right: str = "read") -> Group | None:
    """One of the person's groups by id (one they have ``right`` in); archived ones still
    read, deleted ones do not, and an agent's own room is not a group (it is reached through
    its conversations)."""
    if not is_row_id(group_id):
        return None
    return _with_members(
        groups_reachable(person=person, right=right).filter(
            kind=Group.Kind.TEAM, deleted_at__isnull=True, pk=group_id
        )
    ).first()


def group_has_purge_due(*, owner: AbstractBaseUser, cutoff) -> bool:
    """Whether one of the owner's deleted groups is past its minute to undo."""
    return Group.objects.filter(owner=owner, deleted_at__lt=cutoff).exists()


def room_conversation(*, group: Group, conversation_id: int | None = None) -> Conversation | None:
    """The group's open thread, or — by id — one of its closed ones."""
    threads = Conversation.objects.filter(group=group)
    if conversation_id is not None:
        return threads.filter(pk=conversation_id).first() if is_row_id(conversation_id) else None
    return threads.filter(status=Conversation.Status.OPEN).order_by("-id").first()


def room_messages(*, conversation: Conversation, after: int = 0) -> list[Message]:
    """The thread's turns after seq ``after``, in order, one page at most: ROOM_PAGE turns or
    GARDEN_ROOM_PAGE_CHARS characters of content, whichever comes first (and always one turn,
    so paging never stalls). The sizes are read first, so a page of large turns is never
    loaded whole to be cut."""
    turns = Message.objects.filter(conversation=conversation, seq__gt=after).order_by("seq")
    sizes = turns.annotate(size=Length(Cast("content", TextField()))).values_list("seq", "size")
    budget, total, last = settings.GARDEN_ROOM_PAGE_CHARS, 0, None
    for seq, size in sizes[:ROOM_PAGE]:
        total += size or 0
        if last is not None and total > budget:
            break
        last = seq
    if last is None:
        return []
    return list(turns.filter(seq__lte=last).select_related("speaker_agent", "author"))


def _requests(group: Group | None, conversation: Conversation | None) -> QuerySet[GroupRequest]:
    """A group's requests, or — given ``conversation`` — that thread's (an agent's 1:1
    conversation shares its agent's room with the agent's other conversations)."""
    rows = GroupRequest.objects.all()
    if group is not None:
        rows = rows.filter(group=group)
    if conversation is not None:
        rows = rows.filter(conversation=conversation)
    return rows


def request_active(
    *, group: Group | None = None, conversation: Conversation | None = None
) -> GroupRequest | None:
    return _requests(group, conversation).filter(state__in=GroupRequest.ACTIVE_STATES).first()


def requests_queued(
    *, group: Group | None = None, conversation: Conversation | None = None, limit: int = 20
) -> list[GroupRequest]:
    """The group's (or the thread's) queued requests, the next to start first."""
    return list(
        _requests(group, conversation)
        .filter(state=GroupRequest.State.QUEUED)
        .order_by("id")[:limit]
    )


def requests_queued_count(
    *, group: Group | None = None, conversation: Conversation | None = None
) -> int:
    return _requests(group, conversation).filter(state=GroupRequest.State.QUEUED).count()


def request_get(
    *, group: Group | None = None, conversation: Conversation | None = None, request_id: int
) -> GroupRequest | None:
    if not is_row_id(request_id) or (group is None and conversation is None):
        return None
    return _requests(group, conversation).filter(pk=request_id).first()


def solo_rooms(*, owner: AbstractBaseUser) -> QuerySet[Group]:
    """The owner's agents' own rooms (made on each agent's first 1:1 message)."""
    return Group.objects.filter(owner=owner, kind=Group.Kind.SOLO)


def solo_room_of(*, conversation: Conversation) -> Group | None:
    """The room an agent's 1:1 ``conversation`` runs in; None before its first message."""
    if conversation.agent_id is None:
        return None
    return Group.objects.filter(kind=Group.Kind.SOLO, coordinator_id=conversation.agent_id).first()


def approvals_decidable(*, person: AbstractBaseUser) -> QuerySet[Approval]:
    """The approvals ``person`` may decide: those of the groups of the workspaces where they
        approve (an admin, or one given the approver right), those of the requests they posted
    where they still may post,
        and — outside any workspace (an agent's own room) — their own."""
    return Approval.objects.filter(
        Q(group__workspace__in=workspaces_where(user=person, right="approve"))
        | Q(
            request__message__author=person,
            group__workspace__in=workspaces_where(user=person, right="write"),
        )
        | Q(owner=person, group__workspace__isnull=True)
    )


def approval_list(
    *,
    owner: AbstractBaseUser,
    status: str | None = None,
    conversation_id: int | None = None,
    limit: int = 200,
):
    """The approvals ``owner`` may decide (``approvals_decidable``: one inbox across their
    workspaces), of live groups and kept history, oldest first; ``status`` and
    ``conversation_id`` filter. Approvals of cleared history are decided and detached: they
    answer a decision, not the list."""
    approvals = approvals_decidable(person=owner).filter(conversation__isnull=False)
    approvals = approvals.select_related("agent", "request")
    if status:
        approvals = approvals.filter(status=status)
    if conversation_id is not None:
        if not is_row_id(conversation_id):
            return Approval.objects.none()
        approvals = approvals.filter(conversation_id=conversation_id)
    return approvals.exclude(request__group__deleted_at__isnull=False).order_by("id")[:limit]


def group_memory(*, group: Group) -> QuerySet[MemoryNote]:
    """The notes of the group's memory scope, oldest first."""
    return MemoryNote.objects.filter(owner_id=group.owner_id, scope=group.memory_scope).order_by(
        "id"
    )


def attachments_to_carry(
    *,
    group: Group,
    conversation_id: int,
    artifact_ids: Collection[int],
    media_types: Collection[str],
    limit: int,
) -> dict[int, tuple[str, bytes]]:
    """Of ``artifact_ids``, the files the owner attached in ``group`` (in an agent's own room:
    in its 1:1 thread ``conversation_id``) whose media type is among ``media_types``, the
    ``limit`` most recent: artifact id → (media type, bytes). Another owner's, another
    group's or another thread's artifact is never among them, whatever id a turn names."""
    if not artifact_ids or not media_types or limit <= 0:
        return {}
    where = (
        {"artifact__conversation_id": conversation_id}
        if group.is_solo
        else {"artifact__conversation__group_id": group.pk}
    )
    rows = (
        AttachmentData.objects.filter(
            artifact_id__in=list(artifact_ids),
            artifact__owner_id=group.owner_id,
            artifact__mime_type__in=list(media_types),
            **where,
        )
        .order_by("-artifact_id")
        .values_list("artifact_id", "artifact__mime_type", "data")[:limit]
    )
    return {pk: (media_type, bytes(data)) for pk, media_type, data in rows}


def webhook_endpoint_list(*, owner: AbstractBaseUser) -> QuerySet[WebhookEndpoint]:
    """The owner's webhook endpoints, oldest first."""
    return WebhookEndpoint.objects.filter(owner=owner).select_related("group")


def webhook_endpoint_get(*, owner: AbstractBaseUser, endpoint_id: object) -> WebhookEndpoint | None:
    """One of the owner's webhook endpoints by id; another owner's is None (a 404)."""
    if not is_row_id(endpoint_id):
        return None
    return webhook_endpoint_list(owner=owner).filter(pk=endpoint_id).first()


def webhook_delivery_list(*, endpoint: WebhookEndpoint, limit: int = 50) -> list[WebhookDelivery]:
    """The endpoint's latest deliveries, newest first, each with its attempts."""
    return list(
        WebhookDelivery.objects.filter(endpoint=endpoint)
        .order_by("-id")
        .prefetch_related("attempt_log")[:limit]
    )


# --- what calls cost ---------------------------------------------------------------------------
# A call counts once its reservation is consumed (it ran, or may have); its tokens and cost are
# those its reply recorded. A recorded reply whose model had no price is "unpriced": left out
# of the cost, never counted as free.
_COST = DecimalField(max_digits=18, decimal_places=9)


def _call_totals() -> dict:
    # Each sum is named as the column it adds up, so it must come after anything that reads
    # that column (an annotation shadows its field for the ones after it).
    return {
        "unpriced_calls": Count("id", filter=Q(cost__isnull=True) & ~Q(provider="")),
        "calls": Count("id"),
        "input_tokens": Coalesce(Sum("input_tokens"), 0),
        "output_tokens": Coalesce(Sum("output_tokens"), 0),
        "cost": Coalesce(Sum("cost"), Value(Decimal(0)), output_field=_COST),
    }


def request_member_costs(*, request: GroupRequest) -> list[dict]:
    """The request's calls per member (coordinator included), in the order each first spoke:
    ``{agent, calls, input_tokens, output_tokens, cost, unpriced_calls}``. Their sums are the
    request's own counts."""
    rows = list(
        CallReservation.objects.filter(request=request, status=CallReservation.Status.CONSUMED)
        .values("agent_id")
        .annotate(first=Min("id"), **_call_totals())
        .order_by("first")
    )
    agents = Agent.objects.in_bulk([r["agent_id"] for r in rows])
    return [{"agent": agents[r.pop("agent_id")], **_to_places(r)} for r in rows]


def usage_by_owner_day(
    *, owner_id: int | None = None, since: date | None = None, until: date | None = None
) -> list[dict]:
    """Calls, tokens and cost per owner (of the calls' groups and 1:1 rooms) per UTC day of
    the call, from ``since`` to ``until`` inclusive, newest day first: ``{owner_id, owner,
    day, calls, input_tokens, output_tokens, cost, unpriced_calls}``. Given ``owner_id``, that
    owner's days alone."""
    rows = CallReservation.objects.filter(status=CallReservation.Status.CONSUMED)
    if owner_id is not None:
        rows = rows.filter(owner_id=owner_id)
    if since is not None:
        rows = rows.filter(created_at__gte=datetime.combine(since, time.min, tzinfo=UTC))
    if until is not None:
        rows = rows.filter(
            created_at__lt=datetime.combine(until + timedelta(days=1), time.min, tzinfo=UTC)
        )
    rows = (
        rows.annotate(day=TruncDate("created_at", tzinfo=UTC))
        .values("day", "owner_id")
        .annotate(owner=F("owner__username"), **_call_totals())
        .order_by("-day", "owner", "owner_id")
    )
    return [_to_places(r) for r in rows]


def _to_places(row: dict) -> dict:
    """``row`` with its cost to the columns' nine places, whatever the database's sum gave
    (SQLite adds decimals as floats)."""
    row["cost"] = Decimal(row["cost"]).quantize(PLACES)
    return row


# A usage page shows this many days, up to today, unless it is asked for others.
USAGE_DAYS = 31
# The longest range one page (or CSV) reads.
USAGE_MAX_DAYS = 366


def usage_range(
    since: str | None, until: str | None, *, today: date | None = None
) -> tuple[date, date]:
    """The days a usage page was asked for (``since`` and ``until``, YYYY-MM-DD, either may be
    empty: the last USAGE_DAYS days up to today, UTC; at most USAGE_MAX_DAYS of them, none
    after tomorrow); raises ValueError naming what is wrong."""
    today = today or datetime.now(UTC).date()
    try:
        last = date.fromisoformat(until) if until else today
        first = date.fromisoformat(since) if since else last - timedelta(days=USAGE_DAYS - 1)
    except ValueError as exc:
        raise ValueError("since and until must be dates, YYYY-MM-DD.") from exc
    if first > last:
        raise ValueError("since must not be after until.")
    if last > today + timedelta(days=1):
        raise ValueError("until must not be after tomorrow.")
    if (last - first).days >= USAGE_MAX_DAYS:
        raise ValueError(f"A usage page covers at most {USAGE_MAX_DAYS} days.")
    return first, last


def usage_totals(rows: Iterable[dict]) -> dict:
    """The sums of ``usage_by_owner_day`` rows."""
    totals = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost": Decimal(0)}
    totals["unpriced_calls"] = 0
    for r in rows:
        for name in totals:
            totals[name] += r[name]
    return totals


USAGE_COLUMNS = ("day", "calls", "input_tokens", "output_tokens", "cost_usd", "unpriced_calls")


def usage_csv(rows: Iterable[dict], *, owners: bool) -> str:
    """``usage_by_owner_day`` rows as CSV (with an owner column when ``owners``)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow((("owner",) if owners else ()) + USAGE_COLUMNS)
    for r in rows:
        writer.writerow(
            ([r["owner"]] if owners else [])
            + [
                r["day"].isoformat(),
                r["calls"],
                r["input_tokens"],
                r["output_tokens"],
                r["cost"],
                r["unpriced_calls"],
            ]
        )
    return out.getvalue()


def request_trace_context(*, request_id: int) -> str:
    """The W3C traceparent of the request's trace ('' when it was accepted with traces off):
    a step, a recovery or a decision joins the request's one trace (garden/telemetry.py)."""
    return (
        GroupRequest.objects.filter(pk=request_id).values_list("trace_context", flat=True).first()
        or ""
    )


def approval_trace_context(*, approval_id: int) -> str:
    """The traceparent of the trace of the request an approval belongs to ('' without one)."""
    return (
        Approval.objects.filter(pk=approval_id)
        .values_list("request__trace_context", flat=True)
        .first()
        or ""
    )
