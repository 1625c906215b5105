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

from garden.models import Agent, Conversation
from garden.pricing import PricedCall
from groups import statements
from groups.models import Approval, Group, GroupRequest
from groups.statements import Claim
from groups.statements import tool_wait_cutoff as tool_wait_cutoff  # the loop reads it here


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
    return statements.consume_and_count(request_id, fields, consume=consume, call=call)


def record_step(record: statements.StepRecord) -> statements.Recorded | None:
    """A step's whole write in steady state (``groups.statements.record_step``): the request
    row first, then its thread's, as every step takes them."""
    return statements.record_step(record)


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


def claim_fence(*, request_id: int, fence: int, group_id: int) -> Claim | None:
    """A step's claim (groups/statements.py ``claim_fence``: one statement on PostgreSQL).
    Autocommit: the row lock lasts the claim."""
    return statements.claim_fence(request_id=request_id, fence=fence, group_id=group_id)
