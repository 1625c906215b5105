"""Writes of a mission itself: create, change and delete it with its beat entry, and disable
the missions of a target that went away. Lock order: group row, then mission row."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from garden.errors import ServiceError
from garden.models import Agent, Goal, Run
from garden.services.runs import goal_conclude, run_finish
from groups.models import Group
from missions.models import Mission, MissionRun
from missions.services.checks import check_mission_quota, check_origin, check_target
from missions.services.schedules import (
    Schedule,
    check_schedule,
    mission_periodic_task_delete,
    periodic_task_save,
    periodic_tasks_disable,
)

DISABLED_BY_OWNER = "Disabled by the owner."
GROUP_DELETED = "The target group was deleted."
GROUP_ARCHIVED = "The target group was archived."
AGENT_REMOVED = "The target agent was removed."
OWNER_DEACTIVATED = "Its owner's account was deactivated."

_UNSET: Any = object()


def mission_create(
    *,
    owner: AbstractBaseUser,
    name: str,
    prompt: str,
    target_type: str,
    target_id: int,
    schedule: Schedule,
    enabled: bool = True,
    origin_conversation_id: int | None = None,
) -> Mission:
    """Create a mission and its beat entry (task ``missions.run_mission``, kwargs
    ``{"mission_id": id}``) in one transaction; a refusal writes nothing."""
    check_schedule(schedule)
    with transaction.atomic():
        target = check_target(owner=owner, target_type=target_type, target_id=target_id)
        origin = (
            check_origin(owner=owner, conversation_id=origin_conversation_id)
            if origin_conversation_id is not None
            else None
        )
        mission = Mission.objects.create(
            owner=owner,
            name=name.strip(),
            prompt=prompt.strip(),
            target_type=target_type,
            target_agent=target if isinstance(target, Agent) else None,
            target_group=target if isinstance(target, Group) else None,
            enabled=enabled,
            disabled_reason="" if enabled else DISABLED_BY_OWNER,
            origin_conversation=origin,
        )
        mission.periodic_task = periodic_task_save(mission, schedule)
        mission.save(update_fields=["periodic_task"])
        check_mission_quota(owner=owner)
    return mission


def mission_update(
    *,
    mission: Mission,
    name: str | None = None,
    prompt: str | None = None,
    enabled: bool | None = None,
    schedule: Schedule | None = None,
    target_type: str | None = None,
    target_id: int | None = None,
    origin_conversation_id: int | None = _UNSET,
) -> Mission:
    """Change what is given; ``None`` keeps a part (``origin_conversation_id=None`` clears the
    origin). Enabling checks the target again and clears ``disabled_reason``. A run already
    active goes on; the change applies from the next due run. Takes FOR UPDATE on the mission."""
    if schedule is not None:
        check_schedule(schedule)
    with transaction.atomic():
        locked = (
            Mission.objects.select_for_update(of=("self",), no_key=True)
            .select_related("periodic_task")
            .get(pk=mission.pk)
        )
        beat_changed = schedule is not None
        if (target_type is None) != (target_id is None):
            raise ServiceError(
                "TARGET_INCOMPLETE",
                "Give target_type and target_id together.",
                field="target_id" if target_id is None else "target_type",
            )
        if target_type is not None and target_id is not None:
            target = check_target(owner=locked.owner, target_type=target_type, target_id=target_id)
            locked.target_type = target_type
            locked.target_agent = target if isinstance(target, Agent) else None
            locked.target_group = target if isinstance(target, Group) else None
        if origin_conversation_id is not _UNSET:
            locked.origin_conversation = (
                check_origin(owner=locked.owner, conversation_id=origin_conversation_id)
                if origin_conversation_id is not None
                else None
            )
        if name is not None and name.strip() != locked.name:
            locked.name = name.strip()
            beat_changed = True
        if prompt is not None:
            locked.prompt = prompt.strip()
        if enabled is True and not locked.enabled:
            # Re-enabling asks the same question creation does: is the target still there?
            check_target(
                owner=locked.owner,
                target_type=locked.target_type,
                target_id=locked.target_agent_id or locked.target_group_id,
            )
            locked.enabled, locked.disabled_reason = True, ""
            beat_changed = True
        elif enabled is False and locked.enabled:
            locked.enabled, locked.disabled_reason = False, DISABLED_BY_OWNER
            beat_changed = True
        locked.save()
        # Without a beat entry (staff deleted it) only a new schedule can make one.
        if beat_changed and (locked.periodic_task is not None or schedule is not None):
            locked.periodic_task = periodic_task_save(locked, schedule)
            locked.save(update_fields=["periodic_task"])
    return locked


def mission_delete(*, mission: Mission) -> None:
    """Delete the mission, its runs and its beat entry. An active run's work (a group request
    or a pending reply) is not stopped; its Run and Goal are closed as failed."""
    with transaction.atomic():
        locked = (
            Mission.objects.select_for_update(of=("self",), no_key=True)
            .filter(pk=mission.pk)
            .first()
        )
        if locked is None:
            return
        for active in MissionRun.objects.select_related("run", "goal").filter(
            mission=locked, state=MissionRun.State.ACTIVE
        ):
            if active.run is not None:
                run_finish(
                    run=active.run,
                    status=Run.Status.FAILED,
                    outcome={"mission_run": active.pk, "outcome_code": "MISSION_DELETED"},
                )
            if active.goal is not None:
                goal_conclude(goal=active.goal, status=Goal.Status.FAILED)
        task_id = locked.periodic_task_id
        locked.delete()
        mission_periodic_task_delete(periodic_task_id=task_id)


def _disable(missions_qs: QuerySet[Mission], reason: str) -> int:
    rows = list(missions_qs.filter(enabled=True).values_list("pk", "periodic_task_id"))
    if not rows:
        return 0
    changed = Mission.objects.filter(pk__in=[pk for pk, _ in rows], enabled=True).update(
        enabled=False, disabled_reason=reason[:200], updated_at=timezone.now()
    )
    periodic_tasks_disable([task for _, task in rows if task is not None])
    return changed


def missions_disable_for_group(*, group: Group, reason: str) -> int:
    """Disable every enabled mission targeting ``group`` (deleted or archived); returns how
    many. Callers that hold the group row keep the lock order (group before mission)."""
    return _disable(Mission.objects.filter(target_group_id=group.pk), reason)


def missions_disable_for_agent(*, agent: Agent, reason: str) -> int:
    """Disable every enabled mission targeting ``agent`` (removed); returns how many."""
    return _disable(Mission.objects.filter(target_agent_id=agent.pk), reason)


def missions_disable_for_owner(*, owner_id: int, reason: str = OWNER_DEACTIVATED) -> int:
    """Disable every enabled mission of an owner (deactivated); returns how many."""
    return _disable(Mission.objects.filter(owner_id=owner_id), reason)
