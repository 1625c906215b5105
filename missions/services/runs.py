"""A due run of a mission: start it, or record it as skipped with a reason.

A due run goes through the same path as the owner: a group mission is a GroupRequest made by
``request_create``, an agent mission one made by ``conversation_request_create`` in the
mission's 1:1 conversation (same queue, same twelve calls, same approvals either way). Lock
order: group row (an agent's own room for an agent mission), then mission row, then
mission-run row; an owner's quota lock, when taken, last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from garden.errors import QuotaExceeded, ServiceError
from garden.models import Conversation, Goal
from garden.services.conversations import conversation_create
from garden.services.runs import goal_create, run_start
from groups import lock_order
from groups.models import GroupRequest
from groups.services.requests import (
    conversation_request_create,
    request_create,
    solo_room_for,
)
from missions.models import Mission, MissionRun
from missions.services.conclusion import mission_settle
from missions.services.missions import (
    AGENT_REMOVED,
    DISABLED_BY_OWNER,
    GROUP_ARCHIVED,
    GROUP_DELETED,
)
from missions.services.schedules import periodic_tasks_disable

# Request refusals that will refuse every later run too: the mission is disabled with them.
_LASTING_REQUEST_REFUSALS = ("NOT_FOUND", "UNKNOWN_MEMBER")


@dataclass(frozen=True)
class _Skip:
    code: str
    reason: str
    disable: bool = False


def mission_run_due(
    *,
    mission_id: int,
    trigger: str = MissionRun.Trigger.SCHEDULE,
    task_id: str = "",
) -> MissionRun | None:
    """One due run of the mission: start it, or record it as skipped with a reason.

    Idempotent by ``task_id``: a redelivered task returns the run its first delivery made.
    First settles an active run whose end was not heard (see ``mission_settle``). Returns None
    when the mission no longer exists. Takes FOR UPDATE on the target group, then the mission.
    """
    if task_id:
        done = MissionRun.objects.filter(task_id=task_id).first()
        if done is not None:
            return done
    mission_settle(mission_id=mission_id)
    for _ in range(3):
        head = (
            Mission.objects.filter(pk=mission_id)
            .values("target_group_id", "target_agent_id")
            .first()
        )
        if head is None:
            return None
        # An agent mission's request runs in the agent's own room: its row is locked first too.
        room_id = head["target_group_id"] or (
            solo_room_for(agent_id=head["target_agent_id"]).pk
            if head["target_agent_id"] is not None
            else None
        )
        try:
            with transaction.atomic():
                if room_id is not None:
                    lock_order.lock_group(room_id)
                mission = (
                    Mission.objects.select_for_update(of=("self",), no_key=True)
                    .select_related("owner", "target_agent", "target_group", "conversation")
                    .filter(pk=mission_id)
                    .first()
                )
                if mission is None:
                    return None
                if (mission.target_group_id, mission.target_agent_id) != (
                    head["target_group_id"],
                    head["target_agent_id"],
                ):
                    continue  # retargeted since the read: lock the right group and look again
                return _start_or_skip(mission, trigger=trigger, task_id=task_id)
        except IntegrityError:
            # A concurrent delivery of the same task recorded the run first.
            done = MissionRun.objects.filter(task_id=task_id).first() if task_id else None
            if done is None:
                raise
            return done
    raise RuntimeError(f"mission {mission_id} kept changing its target")


def _skip_of(mission: Mission) -> _Skip | None:
    if not mission.enabled:
        why = mission.disabled_reason or DISABLED_BY_OWNER
        return _Skip("MISSION_DISABLED", f"The mission is disabled: {why}")
    if mission.target_type == Mission.TargetType.GROUP:
        group = mission.target_group
        if group.deleted_at is not None:
            return _Skip("TARGET_DELETED", GROUP_DELETED, disable=True)
        if group.archived_at is not None:
            return _Skip("TARGET_ARCHIVED", GROUP_ARCHIVED, disable=True)
        return None
    agent = mission.target_agent
    if agent.removed_at is not None:
        return _Skip("TARGET_REMOVED", AGENT_REMOVED, disable=True)
    if not agent.can_run:
        return _Skip("TARGET_CANNOT_RUN", "The target agent has no model account.")
    return None


def _record_skip(mission: Mission, skip: _Skip, *, trigger: str, task_id: str) -> MissionRun:
    if skip.disable:
        mission.enabled, mission.disabled_reason = False, skip.reason[:200]
        mission.save(update_fields=["enabled", "disabled_reason", "updated_at"])
        periodic_tasks_disable([mission.periodic_task_id] if mission.periodic_task_id else [])
    return MissionRun.objects.create(
        mission=mission,
        trigger=trigger,
        task_id=task_id,
        state=MissionRun.State.SKIPPED,
        outcome_code=skip.code,
        skipped_reason=skip.reason[:300],
        finished_at=timezone.now(),
    )


def _start_or_skip(mission: Mission, *, trigger: str, task_id: str) -> MissionRun:
    """Caller holds FOR UPDATE on the target group (if any), then on the mission."""
    skip = _skip_of(mission)
    if skip is None:
        active = MissionRun.objects.filter(mission=mission, state=MissionRun.State.ACTIVE).first()
        if active is not None:
            skip = _Skip(
                "MISSION_ALREADY_ACTIVE",
                f"Run {active.pk} of this mission was still active; a mission never has "
                "two runs at once.",
            )
    if skip is not None:
        return _record_skip(mission, skip, trigger=trigger, task_id=task_id)

    refs: dict[str, Any]
    conversation = (
        _mission_conversation(mission) if mission.target_type == Mission.TargetType.AGENT else None
    )
    try:
        # A savepoint: a refusal leaves neither a turn nor a request behind.
        with transaction.atomic():
            if conversation is None:
                request = request_create(
                    group=mission.target_group,
                    text=mission.prompt,
                    source=GroupRequest.Source.MISSION,
                )
                refs = {
                    "group_request": request,
                    "conversation_id": request.conversation_id,
                    "owner_message_id": request.message_id,
                }
                actor = f"group:{mission.target_group_id}"
            else:
                request = conversation_request_create(
                    owner=mission.owner,
                    conversation=conversation,
                    text=mission.prompt,
                    source=GroupRequest.Source.MISSION,
                )
                refs = {
                    "group_request": request,
                    "conversation": conversation,
                    "owner_message_id": request.message_id,
                }
                actor = f"agent:{mission.target_agent_id}"
    except ServiceError as exc:
        # A group that is gone or a member no longer in it will not come back by waiting.
        lasting = (
            mission.target_group_id is not None
            and not isinstance(exc, QuotaExceeded)
            and exc.code in _LASTING_REQUEST_REFUSALS
        )
        return _record_skip(
            mission,
            _Skip(exc.code, f"The run could not start: {exc}", disable=lasting),
            trigger=trigger,
            task_id=task_id,
        )
    goal = goal_create(
        kind=Goal.Kind.MISSION,
        owner=mission.owner,
        title=f"mission: {mission.name}"[:200],
        origin=_origin_of(mission),
    )
    run = run_start(goal=goal, actor=actor)
    return MissionRun.objects.create(
        mission=mission,
        trigger=trigger,
        task_id=task_id,
        state=MissionRun.State.ACTIVE,
        goal=goal,
        run=run,
        **refs,
    )


def _origin_of(mission: Mission) -> dict[str, Any] | None:
    """The goal's origin: the conversation the owner asked in while it is open, else none (the
    note then goes to notes/ rather than being refused by a closed thread)."""
    conversation_id = mission.origin_conversation_id
    if conversation_id is None:
        return None
    still_open = (
        Conversation.objects.filter(pk=conversation_id, status=Conversation.Status.OPEN)
        .exclude(group__deleted_at__isnull=False)
        .exists()
    )
    return {"kind": "conversation", "conversation_id": conversation_id} if still_open else None


def _mission_conversation(mission: Mission) -> Conversation:
    """The agent mission's own 1:1 conversation, reused by every run; a new one when it was
    closed or deleted, or the mission now targets another agent. Caller holds the mission."""
    conversation = mission.conversation
    if (
        conversation is None
        or conversation.status != Conversation.Status.OPEN
        or conversation.agent_id != mission.target_agent_id
    ):
        conversation = conversation_create(
            owner=mission.owner, agent=mission.target_agent, title=f"Mission: {mission.name}"[:200]
        )
        mission.conversation = conversation
        mission.save(update_fields=["conversation", "updated_at"])
    return conversation
