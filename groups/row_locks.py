"""Row locks of the group loop, in one place and one order: group, then its agents, then
request(s), then approvals, then conversation. Every function expects an open transaction and takes only the
rows of its own table (``of=("self",)``), so a joined filter never locks a neighbour.

Whoever needs two of these takes them in this order; the owner's quota lock
(garden/quotas.py), when taken, comes last."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from garden.models import Agent, Approval, Conversation
from groups.models import Group, GroupRequest


def lock_group(
    group_id: int, *, owner_id: int | None = None, live: bool = False, skip_locked: bool = False
) -> Group | None:
    """The group row, FOR UPDATE; None when it is gone (or not ``owner_id``'s, or — with
    ``live`` — deleted). ``skip_locked`` gives None instead of waiting for another holder."""
    rows = Group.objects.select_for_update(of=("self",), skip_locked=skip_locked).filter(
        pk=group_id
    )
    if owner_id is not None:
        rows = rows.filter(owner_id=owner_id)
    if live:
        rows = rows.filter(deleted_at__isnull=True)
    return rows.first()


def lock_agents(agent_ids: Iterable[int]) -> list[Agent]:
    """The agents named, in id order (so two changes never wait on each other crosswise)."""
    return list(
        Agent.objects.select_for_update(of=("self",)).filter(pk__in=agent_ids).order_by("pk")
    )


def lock_group_requests(
    group_id: int, *, states: Sequence[str], limit: int | None = None
) -> list[GroupRequest]:
    """The group's requests in ``states`` (the ``limit`` oldest), oldest first. Caller holds
    the group row."""
    rows = (
        GroupRequest.objects.select_for_update(of=("self",))
        .filter(group_id=group_id, state__in=states)
        .order_by("id")
    )
    return list(rows[:limit] if limit else rows)


def lock_request(request_id: int) -> GroupRequest | None:
    """One request row. Caller holds its group row, unless it is a step (which changes
    nothing group-wide and so takes the request alone)."""
    return GroupRequest.objects.select_for_update(of=("self",)).filter(pk=request_id).first()


def lock_request_values(request_id: int, *fields: str) -> tuple | None:
    """A step's re-check: ``fields`` of the request row, read under FOR UPDATE."""
    return (
        GroupRequest.objects.select_for_update(of=("self",))
        .filter(pk=request_id)
        .values_list(*fields)
        .first()
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
        Approval.objects.select_for_update(of=("self",))
        .select_related("agent")
        .filter(request_id=request_id, status=Approval.Status.PENDING)
        .order_by("id")
    )


def lock_approval(approval_id: int) -> Approval | None:
    """One approval. Caller holds its request's group and request rows first, if any."""
    return (
        Approval.objects.select_for_update(of=("self",))
        .select_related("agent")
        .filter(pk=approval_id)
        .first()
    )


def lock_conversation(conversation_id: int) -> Conversation | None:
    """A thread's row, last. Caller holds its group row."""
    return Conversation.objects.select_for_update(of=("self",)).filter(pk=conversation_id).first()
