"""Writes for groups: create, change, delete with a minute of undo, purge, clear and archive.

Every change goes through ``groups.domain.rules``; every write takes the group row FOR UPDATE first
(the lock order everywhere: group before request). Clear and delete stop the group's work
first, as Stop does. Events are pushed to the group's channel after commit.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from garden import events
from garden.errors import FieldError, QuotaExceeded, ServiceError, is_row_id, not_found
from garden.models import Agent, Conversation, MemoryNote, Workspace
from garden.quotas import owner_lock, quota_hold
from garden.selectors import workspace_may, workspace_membership
from garden.services.attachments import attachments_delete
from garden.services.workspaces import workspace_personal_ensure
from groups import lock_order, scheduling, selectors
from groups.demo import household_finances
from groups.domain import rules
from groups.models import Approval, Group, Membership
from groups.payloads import group_event
from groups.services.requests import request_stop_active, stop_drafts
from groups.signals import approvals_changed_on_commit

log = logging.getLogger(__name__)

UNDO_SECONDS = 60
UNDO_WINDOW = timedelta(seconds=UNDO_SECONDS)


def _rules_broken(errors: Sequence[rules.GroupRuleError]) -> ServiceError:
    """The rule set refused the change: every broken rule, each with its field and code."""
    return ServiceError(
        "invalid",
        "The request is invalid.",
        field=errors[0].field,
        errors=[FieldError(e.field, e.code, e.message) for e in errors],
    )


def _push(group: Group, *, change: str) -> None:
    events.send_event_on_commit(
        channel=events.group_channel(group.pk), event=group_event(group, change=change)
    )


def _candidates(ids: Iterable[int], *, lock: bool = False) -> dict[int, rules.Candidate]:
    """The agents named by ``ids``, whoever owns them: the rules decide what is not found."""
    wanted = {i for i in ids if is_row_id(i)}
    if not wanted:
        return {}
    # Locked: an agent being removed right now waits for this change, or this change sees it.
    agents = lock_order.lock_agents(wanted) if lock else Agent.objects.filter(pk__in=wanted)
    return {a.pk: rules.Candidate.of(a) for a in agents}


def _lock_group(*, group_id: int, owner_id: int | None = None) -> Group:
    """Caller holds a transaction. The group row FOR UPDATE; deleted reads as not found."""
    group = lock_order.lock_group(group_id, owner_id=owner_id, live=True)
    if group is None:
        raise not_found("group")
    return group


def _shape(group: Group) -> rules.GroupShape:
    members = tuple(group.memberships.order_by("position", "id").values_list("agent_id", flat=True))
    return rules.GroupShape(name=group.name, members=members, coordinator=group.coordinator_id)


def _set_members(group: Group, members: Sequence[int]) -> None:
    """Make the membership exactly ``members``, in that order. Caller holds the group lock."""
    Membership.objects.filter(group=group).exclude(agent_id__in=members).delete()
    existing = {m.agent_id: m for m in Membership.objects.filter(group=group)}
    for position, agent_id in enumerate(members):
        membership = existing.get(agent_id)
        if membership is None:
            Membership.objects.create(group=group, agent_id=agent_id, position=position)
        elif membership.position != position:
            membership.position = position
            membership.save(update_fields=["position"])


def group_create_starter(*, owner: AbstractBaseUser) -> Group:
    """A first run's team in one step: "Household finances", Concierge coordinating Ledger and
    Finance Advisor, on offline scripted models (move them to real models on their pages).
    Only for an owner with no group yet (409 ROSTER_NOT_EMPTY otherwise); the agents and their
    accounts count against the owner's quotas as any others do."""
    with transaction.atomic():
        owner_lock(owner.pk)  # two clicks at once make one team
        if Group.objects.filter(
            owner=owner, kind=Group.Kind.TEAM, deleted_at__isnull=True
        ).exists():
            raise ServiceError(
                "ROSTER_NOT_EMPTY",
                "The starter team is for a first run: you have a group already.",
                status=409,
            )
        # Paced: offline scripts answer at once, and a first user should see the team work.
        group = household_finances(owner, pace=settings.GARDEN_STARTER_PACE_SECONDS)
        _push(group, change="created")
    return group


def _home_workspace(owner: AbstractBaseUser, workspace_id: int | None) -> Workspace:
    if workspace_id is None:
        return workspace_personal_ensure(user=owner)
    membership = workspace_membership(user=owner, workspace_id=workspace_id)
    if membership is None:
        raise not_found("workspace", field="workspace")
    if not workspace_may(membership, "write"):
        raise ServiceError(
            "WORKSPACE_ROLE",
            "A viewer of this workspace cannot make groups in it.",
            field="workspace",
            status=403,
        )
    return membership.workspace


def group_create(
    *,
    owner: AbstractBaseUser,
    name: str | None,
    members: Sequence[int],
    coordinator: int | None = None,
    room_cap_chars: int | None = None,
    workspace: int | None = None,
) -> Group:
    """Create a group under the rule set; without a coordinator, Concierge coordinates;
    without a room cap, the default one. Its room is shared with the people of ``workspace``
    (one the owner may write in: WORKSPACE_NOT_FOUND, WORKSPACE_ROLE) — without it, the
    owner's own. Its members are the owner's agents, and its calls go on the owner's
    accounts, whoever posts."""
    members = list(members)
    home = _home_workspace(owner, workspace)
    concierge = (
        Agent.objects.filter(owner=owner, builtin=Agent.Builtin.CONCIERGE).first()
        if coordinator is None
        else None
    )
    default = concierge.pk if concierge else coordinator
    with transaction.atomic():
        agents = _candidates([*members, *([default] if default is not None else [])], lock=True)
        result = rules.check_group_create(
            owner_id=owner.pk,
            name=name,
            members=members,
            coordinator=coordinator,
            agents=agents,
            default_coordinator=agents.get(concierge.pk) if concierge else None,
        )
        errors = [*result.errors, *_room_cap_errors(room_cap_chars)]
        if errors:
            raise _rules_broken(errors)
        shape = result.shape
        group = Group.objects.create(
            owner=owner,
            workspace=home,
            name=shape.name,
            coordinator_id=shape.coordinator,
            **({"room_cap_chars": room_cap_chars} if room_cap_chars is not None else {}),
        )
        _set_members(group, shape.members)
        limit = settings.GARDEN_MAX_GROUPS_PER_OWNER
        quota_hold(
            owner_id=owner.pk,
            limit=limit,
            count=Group.objects.filter(
                owner=owner, kind=Group.Kind.TEAM, deleted_at__isnull=True
            ).count,
            refusal=lambda: QuotaExceeded(
                "GROUP_LIMIT",
                f"You have {limit} groups, the limit on this site; delete one to make another.",
            ),
        )
        _push(group, change="created")
    return group


def group_check_change(
    *,
    group: Group,
    name: str | None = None,
    members: Sequence[int] | None = None,
    coordinator: int | None = None,
    lock: bool = False,
) -> tuple[rules.GroupShape, rules.RuleResult]:
    """The group's current shape and the rule set's verdict on the change (nothing written).

    With ``lock`` the caller holds FOR UPDATE on the group row and the agents named are
    locked too. The admin form calls this to show the rules' messages on its fields.
    """
    current = _shape(group)
    named = [
        *current.members,
        current.coordinator,
        *(members or []),
        *([coordinator] if coordinator is not None else []),
    ]
    result = rules.check_group_change(
        owner_id=group.owner_id,
        current=current,
        agents=_candidates(named, lock=lock),
        name=name,
        members=list(members) if members is not None else None,
        coordinator=coordinator,
    )
    return current, result


def group_update(
    *,
    group: Group,
    name: str | None = None,
    members: Sequence[int] | None = None,
    coordinator: int | None = None,
    room_cap_chars: int | None = None,
) -> Group:
    """Change the name, coordinator, membership (in list order) and/or room cap; ``None``
    keeps a part. A smaller cap applies from the next step (the room is bounded to it, or
    rolled over).

    Takes FOR UPDATE on the group row, then on the agents the change names.
    """
    with transaction.atomic():
        locked = _lock_group(group_id=group.pk, owner_id=group.owner_id)
        current, result = group_check_change(
            group=locked, name=name, members=members, coordinator=coordinator, lock=True
        )
        errors = [*result.errors, *_room_cap_errors(room_cap_chars)]
        if errors:
            raise _rules_broken(errors)
        shape = result.shape
        cap = locked.room_cap_chars if room_cap_chars is None else room_cap_chars
        if shape == current and cap == locked.room_cap_chars:
            return locked
        locked.name = shape.name
        locked.coordinator_id = shape.coordinator
        locked.room_cap_chars = cap
        locked.save(update_fields=["name", "coordinator", "room_cap_chars", "updated_at"])
        if shape.members != current.members:
            _set_members(locked, shape.members)
        _push(locked, change="changed")
    return locked


def _room_cap_errors(value: int | None) -> list[rules.GroupRuleError]:
    return rules.check_room_cap(value, maximum=settings.GARDEN_MAX_ROOM_CAP_CHARS)


def group_delete(*, group: Group, now: datetime | None = None) -> datetime:
    """Stop the group's work, mark it deleted and return ``undo_until`` (a minute later).

    The group leaves every read at once; ``group_restore`` brings it back until
    ``undo_until``; after that ``group_purge_expired`` removes it for good.
    """
    drafts = stop_drafts(group.pk)  # read before the transaction: the cache is I/O
    with transaction.atomic():
        locked = _lock_group(group_id=group.pk, owner_id=group.owner_id)
        request_stop_active(
            group=locked, reason="The group was deleted.", include_queued=True, drafts=drafts
        )
        locked.deleted_at = now or timezone.now()
        locked.save(update_fields=["deleted_at", "updated_at"])
        _push(locked, change="deleted")
    group.deleted_at = locked.deleted_at
    return locked.deleted_at + UNDO_WINDOW


def group_restore(*, owner: AbstractBaseUser, group_id: int, now: datetime | None = None) -> Group:
    """Bring a deleted group back as it was, until a minute after its deletion.

    A group that is not deleted is returned as it is. Refuses NOT_FOUND (404) for an unknown
    (or another owner's, or already purged) group, UNDO_EXPIRED (410) after the minute.
    """
    now = now or timezone.now()
    if not is_row_id(group_id):
        raise not_found("group")
    with transaction.atomic():
        group = lock_order.lock_group(group_id, owner_id=owner.pk)
        if group is None:
            raise not_found("group")
        if group.deleted_at is None:
            return group
        if now > group.deleted_at + UNDO_WINDOW:
            raise ServiceError(
                "UNDO_EXPIRED", "The minute to undo this deletion has passed.", status=410
            )
        group.deleted_at = None
        group.save(update_fields=["deleted_at", "updated_at"])
        _push(group, change="restored")
    return group


def group_purge_expired(
    *, owner_id: int | None = None, now: datetime | None = None, limit: int | None = None
) -> int:
    """Remove for good the groups deleted more than a minute ago (one owner's, or all; at most
    ``limit`` of them); returns how many. The next group-list read runs it for its owner
    (``purge_due_groups_on_read``), and beat for groups nobody reads.

    Each goes with its conversations and everything that cascades from them (messages,
    requests, reservations, approvals), its member rows, the row itself, and the notes and
    preferences of its memory scope. Its agents are never touched; documents its agents
    made keep their row (their conversation link is cleared by SET_NULL) and stay in the
    owner's documents list (GET /api/artifacts, as "no conversation"), counted in their
    storage and deletable there, so nothing is left that only staff could see.
    """
    cutoff = (now or timezone.now()) - UNDO_WINDOW
    due = Group.objects.filter(deleted_at__lt=cutoff)
    if owner_id is not None:
        due = due.filter(owner_id=owner_id)
    due_ids = due.order_by("deleted_at").values_list("pk", flat=True)
    purged = 0
    for group_id in due_ids if limit is None else due_ids[:limit]:
        with transaction.atomic():
            # Another worker may be purging the same group: take it or leave it.
            group = lock_order.lock_group(group_id, skip_locked=True)
            if group is None or group.deleted_at is None or group.deleted_at >= cutoff:
                continue
            MemoryNote.objects.filter(owner_id=group.owner_id, scope=group.memory_scope).delete()
            # Gone for good, approvals too — detached ones of an earlier clear included (they
            # keep their group) — and the files attached in its threads.
            Approval.objects.filter(Q(group=group) | Q(conversation__group=group)).delete()
            attachments_delete(conversations=Conversation.objects.filter(group=group))
            Conversation.objects.filter(group=group).delete()
            group.delete()
            purged += 1
    return purged


def purge_due_groups_on_read(*, owner: AbstractBaseUser, now: datetime | None = None) -> int:
    """The group-list read's part: the next read after a deleted group's minute removes it
    for good, here, with no worker needed; returns how many it removed. A read removes at
    most GARDEN_PURGE_ON_READ groups (a read stays quick however many were deleted at once)
    and asks a worker, once per half minute, for any left over."""
    now = now or timezone.now()
    if not selectors.group_has_purge_due(owner=owner, cutoff=now - UNDO_WINDOW):
        return 0
    purged = group_purge_expired(owner_id=owner.pk, now=now, limit=settings.GARDEN_PURGE_ON_READ)
    if selectors.group_has_purge_due(owner=owner, cutoff=now - UNDO_WINDOW):
        try:
            # One nudge per owner per half minute, however often the roster is read meanwhile.
            if cache.add(f"purge-nudge:{owner.pk}", 1, timeout=30):
                scheduling.purge_deleted_groups_soon(owner.pk)
        except Exception:  # a nudge only: beat purges anyway, and a read must not fail on it
            log.warning("could not ask for the purge of owner %s's groups", owner.pk, exc_info=True)
    return purged


def group_clear(*, group: Group) -> int:
    """Stop the group's work and delete every conversation of it; returns how many.

    Messages and requests go with the conversations (their calls' reservations stay, kept
    for the owner's usage without a request), and so does the summary a
    rollover carried forward (it lives on the thread it starts). Approvals stay, decided and
    detached, so a late decision on any surface is told it was already decided. The group, its
    members, its coordinator and its memory scope stay; documents its agents made keep their
    row, without a thread, in the owner's documents list (counted and deletable there).
    """
    with transaction.atomic():
        locked = _lock_group(group_id=group.pk, owner_id=group.owner_id)
        reason = "The history was cleared."
        request_stop_active(group=locked, reason=reason, include_queued=True)
        conversations = Conversation.objects.filter(group=locked)
        # Approvals stay, detached, so a late decision finds them decided rather than gone;
        # any still undecided are rejected with the rest of the history.
        rejected = list(
            Approval.objects.filter(
                conversation__in=conversations, status=Approval.Status.PENDING
            ).values_list("pk", flat=True)
        )
        Approval.objects.filter(pk__in=rejected, status=Approval.Status.PENDING).update(
            status=Approval.Status.REJECTED, reason=reason, decided_at=timezone.now()
        )
        approvals_changed_on_commit(rejected)
        attachments_delete(conversations=conversations)
        count = conversations.count()
        conversations.delete()
        _push(locked, change="cleared")
    return count


def group_archive(*, group: Group, now: datetime | None = None) -> Group:
    """The room leaves the roster and keeps its transcript; idempotent.

    Its work is stopped first: an archived room has no roster entry from which it could be
    watched, stopped or have an approval decided.
    """
    drafts = stop_drafts(group.pk)  # read before the transaction: the cache is I/O
    with transaction.atomic():
        locked = _lock_group(group_id=group.pk, owner_id=group.owner_id)
        if locked.archived_at is not None:
            return locked
        request_stop_active(
            group=locked, reason="The group was archived.", include_queued=True, drafts=drafts
        )
        locked.archived_at = now or timezone.now()
        locked.save(update_fields=["archived_at", "updated_at"])
        _push(locked, change="archived")
    return locked
