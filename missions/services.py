"""Writes for missions: create, change and delete a mission with its beat entry; start or skip
each due run; conclude a run and have the gardener say so.

A due run goes through the same path as the owner: a group mission is a GroupRequest made by
``request_create`` (same queue, same twelve calls, same approvals), an agent mission is an owner
turn in the mission's 1:1 conversation, posted on the owner's behalf. Lock order: group row,
then mission row, then mission-run row; an owner's quota lock, when taken, last.
"""

from __future__ import annotations

import itertools
import json
import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask, PeriodicTasks

from garden.errors import QuotaExceeded, ServiceError
from garden.models import Agent, Conversation, Goal, Message, Run
from garden.quotas import quota_hold
from garden.services.chat import conversation_post_owner_message
from garden.services.conversations import conversation_create
from garden.services.runs import goal_conclude, goal_create, run_finish, run_start
from groups.models import Group, GroupRequest
from groups.services.requests import request_create

from .models import Mission, MissionRun

log = logging.getLogger(__name__)

TASK_NAME = "missions.run_mission"
MIN_EVERY_SECONDS = 60
MAX_EVERY_SECONDS = 366 * 24 * 3600
CRONTAB_FIELDS = ("minute", "hour", "day_of_week", "day_of_month", "month_of_year")
# Larger ids cannot name a row; filtering by them would overflow the database integer.
MAX_ID = 2**63 - 1

DISABLED_BY_OWNER = "Disabled by the owner."
GROUP_DELETED = "The target group was deleted."
GROUP_ARCHIVED = "The target group was archived."
AGENT_REMOVED = "The target agent was removed."

# Request refusals that will refuse every later run too: the mission is disabled with them.
_LASTING_REQUEST_REFUSALS = ("NOT_FOUND", "UNKNOWN_MEMBER")


class MissionError(ServiceError):
    """A named refusal of a mission write; the API maps it to a 400 (or ``status``)."""

    def __init__(
        self, code: str, message: str, *, field: str = "non_field_errors", status: int = 400
    ) -> None:
        super().__init__(code, message, field=field, status=status)


@dataclass(frozen=True)
class Schedule:
    """Either ``every_seconds`` (an IntervalSchedule) or crontab fields (a CrontabSchedule)."""

    every_seconds: int | None = None
    minute: str = "*"
    hour: str = "*"
    day_of_week: str = "*"
    day_of_month: str = "*"
    month_of_year: str = "*"
    timezone: str = "UTC"

    @property
    def kind(self) -> str:
        return "interval" if self.every_seconds is not None else "crontab"


_UNSET: Any = object()


# --- checks -----------------------------------------------------------------------------------


def check_target(*, owner: AbstractBaseUser, target_type: str, target_id: int) -> Agent | Group:
    """The owner's agent or group a mission may target: not another owner's, not removed,
    deleted or archived. Raises MissionError on field ``target_id``."""
    if target_type not in Mission.TargetType.values:
        raise MissionError(
            "invalid_choice",
            f"target_type must be one of {', '.join(Mission.TargetType.values)}.",
            field="target_type",
        )
    if not 0 < target_id <= MAX_ID:
        raise MissionError("TARGET_NOT_FOUND", f"No such {target_type}.", field="target_id")
    if target_type == Mission.TargetType.AGENT:
        agent = Agent.objects.filter(owner=owner, pk=target_id).first()
        if agent is None:
            raise MissionError("TARGET_NOT_FOUND", "No such agent.", field="target_id")
        if agent.removed_at is not None:
            raise MissionError("TARGET_REMOVED", "This agent was removed.", field="target_id")
        return agent
    group = Group.objects.filter(owner=owner, pk=target_id, deleted_at__isnull=True).first()
    if group is None:
        raise MissionError("TARGET_NOT_FOUND", "No such group.", field="target_id")
    if group.archived_at is not None:
        raise MissionError("TARGET_ARCHIVED", "This group is archived.", field="target_id")
    return group


def check_origin(*, owner: AbstractBaseUser, conversation_id: int) -> Conversation:
    """An open conversation of the owner's (1:1 or a group's) where the mission was asked for."""
    conversation = (
        Conversation.objects.filter(owner=owner, pk=conversation_id)
        .exclude(group__deleted_at__isnull=False)
        .first()
        if 0 < conversation_id <= MAX_ID
        else None
    )
    if conversation is None:
        raise MissionError("ORIGIN_NOT_FOUND", "No such conversation.", field="origin_conversation")
    if conversation.status != Conversation.Status.OPEN:
        raise MissionError(
            "ORIGIN_CLOSED", "This conversation is closed.", field="origin_conversation"
        )
    return conversation


def check_schedule(schedule: Schedule) -> None:
    """Refuse a schedule that would run more often than GARDEN_MIN_MISSION_INTERVAL_SECONDS
    (for a crontab: its closest two runs in a day)."""
    least = settings.GARDEN_MIN_MISSION_INTERVAL_SECONDS
    gap = (
        schedule.every_seconds
        if schedule.every_seconds is not None
        else crontab_min_gap_seconds(schedule)
    )
    if gap < least:
        raise MissionError(
            "SCHEDULE_TOO_FREQUENT",
            f"Missions run at most every {least} seconds "
            f"on this site; this schedule runs every {gap} seconds.",
            field="schedule",
        )


def crontab_min_gap_seconds(schedule: Schedule) -> int:
    """The shortest time between two runs of a crontab, from its minutes and hours (days only
    ever spread runs further apart)."""
    from celery.schedules import crontab

    cron = crontab(minute=schedule.minute, hour=schedule.hour)
    times = sorted(h * 60 + m for h in cron.hour for m in cron.minute)
    if len(times) < 2:
        return 24 * 3600
    gaps = [b - a for a, b in itertools.pairwise(times)]
    gaps.append(times[0] + 24 * 60 - times[-1])
    return min(gaps) * 60


def check_mission_quota(*, owner: AbstractBaseUser) -> None:
    """After the new mission is written: refuse it past the owner's limit (takes the owner's
    quota lock, last)."""
    limit = settings.GARDEN_MAX_MISSIONS_PER_OWNER
    quota_hold(
        owner_id=owner.pk,
        limit=limit,
        count=Mission.objects.filter(owner=owner).count,
        refusal=lambda: QuotaExceeded(
            "MISSION_LIMIT",
            f"You have {limit} missions, the limit on this site; delete one to make another.",
        ),
    )


# --- the beat entry -------------------------------------------------------------------------


def _interval(every_seconds: int) -> IntervalSchedule:
    # Schedules are shared rows without a unique constraint: reuse the oldest match.
    found = (
        IntervalSchedule.objects.filter(every=every_seconds, period=IntervalSchedule.SECONDS)
        .order_by("pk")
        .first()
    )
    return found or IntervalSchedule.objects.create(
        every=every_seconds, period=IntervalSchedule.SECONDS
    )


def _crontab(schedule: Schedule) -> CrontabSchedule:
    fields = {name: getattr(schedule, name) for name in CRONTAB_FIELDS}
    found = (
        CrontabSchedule.objects.filter(**fields, timezone=schedule.timezone).order_by("pk").first()
    )
    return found or CrontabSchedule.objects.create(**fields, timezone=schedule.timezone)


def _task_name(mission: Mission) -> str:
    return f"mission {mission.pk}: {mission.name}"[:200]


def _periodic_task_save(mission: Mission, schedule: Schedule | None) -> PeriodicTask:
    """Create or update the mission's beat entry; saved through ``save()`` so a running beat
    reloads. Caller holds the mission row (or just created it)."""
    task = mission.periodic_task or PeriodicTask()
    task.name = _task_name(mission)
    task.task = TASK_NAME
    task.kwargs = json.dumps({"mission_id": mission.pk})
    task.enabled = mission.enabled
    task.description = f"Mission {mission.pk} ({mission.target_type}); see the mission's admin."
    if schedule is not None:
        if schedule.every_seconds is not None:
            task.interval, task.crontab = _interval(schedule.every_seconds), None
        else:
            task.interval, task.crontab = None, _crontab(schedule)
    task.save()
    return task


def _periodic_tasks_disable(task_ids: list[int]) -> None:
    if task_ids:
        PeriodicTask.objects.filter(pk__in=task_ids).update(enabled=False, last_run_at=None)
        # update() skips PeriodicTask.save(), which is what tells a running beat to reload.
        PeriodicTasks.update_changed()


def mission_periodic_task_delete(*, periodic_task_id: int | None) -> None:
    if periodic_task_id is not None:
        PeriodicTask.objects.filter(pk=periodic_task_id).delete()


# --- create, change, delete -----------------------------------------------------------------


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
        mission.periodic_task = _periodic_task_save(mission, schedule)
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
            Mission.objects.select_for_update(of=("self",))
            .select_related("periodic_task")
            .get(pk=mission.pk)
        )
        beat_changed = schedule is not None
        if (target_type is None) != (target_id is None):
            raise MissionError(
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
            locked.periodic_task = _periodic_task_save(locked, schedule)
            locked.save(update_fields=["periodic_task"])
    return locked


def mission_delete(*, mission: Mission) -> None:
    """Delete the mission, its runs and its beat entry. An active run's work (a group request
    or a pending reply) is not stopped; its Run and Goal are closed as failed."""
    with transaction.atomic():
        locked = Mission.objects.select_for_update(of=("self",)).filter(pk=mission.pk).first()
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
    _periodic_tasks_disable([task for _, task in rows if task is not None])
    return changed


def missions_disable_for_group(*, group: Group, reason: str) -> int:
    """Disable every enabled mission targeting ``group`` (deleted or archived); returns how
    many. Callers that hold the group row keep the lock order (group before mission)."""
    return _disable(Mission.objects.filter(target_group_id=group.pk), reason)


def missions_disable_for_agent(*, agent: Agent, reason: str) -> int:
    """Disable every enabled mission targeting ``agent`` (removed); returns how many."""
    return _disable(Mission.objects.filter(target_agent_id=agent.pk), reason)


# --- a due run ---------------------------------------------------------------------------------


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
        head = Mission.objects.filter(pk=mission_id).values("target_group_id").first()
        if head is None:
            return None
        try:
            with transaction.atomic():
                if head["target_group_id"] is not None:
                    Group.objects.select_for_update(of=("self",)).filter(
                        pk=head["target_group_id"]
                    ).first()
                mission = (
                    Mission.objects.select_for_update(of=("self",))
                    .select_related("owner", "target_agent", "target_group", "conversation")
                    .filter(pk=mission_id)
                    .first()
                )
                if mission is None:
                    return None
                if mission.target_group_id != head["target_group_id"]:
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
        _periodic_tasks_disable([mission.periodic_task_id] if mission.periodic_task_id else [])
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
                message = conversation_post_owner_message(
                    owner=mission.owner, conversation=conversation, text=mission.prompt
                )
                refs = {"conversation": conversation, "owner_message": message}
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


# --- the end of a run ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Ending:
    ok: bool
    code: str
    text: str


def _ending_of(mission_run: MissionRun) -> _Ending | None:
    """How the run's work ended, or None while it goes on."""
    if mission_run.mission.target_type == Mission.TargetType.GROUP:
        request = mission_run.group_request
        if request is None:
            return _Ending(
                False,
                "REQUEST_GONE",
                "The group request is gone: the group's history was cleared or the group removed.",
            )
        if request.state not in GroupRequest.FINISHED_STATES:
            return None
        if request.state == GroupRequest.State.COMPLETED:
            return _Ending(True, request.outcome_code or "COMPLETED", request.outcome)
        return _Ending(
            False,
            request.outcome_code or request.state.upper(),
            request.outcome or f"The request {request.state}.",
        )
    if mission_run.owner_message_id is None:
        return _Ending(False, "CONVERSATION_GONE", "The mission's conversation was deleted.")
    reply = (
        Message.objects.filter(in_reply_to_id=mission_run.owner_message_id)
        .only("speaker_kind", "content")
        .first()
    )
    if reply is None:
        return None
    if reply.speaker_kind == Message.SpeakerKind.AGENT:
        return _Ending(True, "REPLIED", reply.text)
    return _Ending(False, "REPLY_FAILED", reply.text)


def mission_run_conclude(*, mission_run_id: int) -> MissionRun | None:
    """Close an active run whose work has ended: its state and outcome, its Run (succeeded or
    failed) and, when it fell short, its Goal (failed); then the gardener's note. Idempotent:
    a run still going, or already closed, is returned unchanged.

    Call outside a transaction: the note is emitted after the close commits.
    """
    with transaction.atomic():
        mission_run = (
            MissionRun.objects.select_for_update(of=("self",))
            .select_related("mission", "group_request", "run", "goal")
            .filter(pk=mission_run_id)
            .first()
        )
        if mission_run is None or mission_run.state != MissionRun.State.ACTIVE:
            return mission_run
        ending = _ending_of(mission_run)
        if ending is None:
            return mission_run
        mission_run.state = MissionRun.State.CONCLUDED if ending.ok else MissionRun.State.FAILED
        mission_run.outcome_code, mission_run.outcome = ending.code[:40], ending.text
        mission_run.finished_at = timezone.now()
        mission_run.report_state = MissionRun.Report.SENDING  # claimed for the note below
        mission_run.save(
            update_fields=["state", "outcome_code", "outcome", "finished_at", "report_state"]
        )
        if mission_run.run is not None:
            run_finish(
                run=mission_run.run,
                status=Run.Status.SUCCEEDED if ending.ok else Run.Status.FAILED,
                outcome={
                    "mission_run": mission_run.pk,
                    "outcome_code": ending.code,
                    "group_request": mission_run.group_request_id,
                    "owner_message": mission_run.owner_message_id,
                },
            )
        if not ending.ok and mission_run.goal is not None:
            # Closed as failed before the note: the note then says so, and conclude_durable_goal
            # leaves an already-closed goal as it is.
            goal_conclude(goal=mission_run.goal, status=Goal.Status.FAILED)
    _report(mission_run)
    return mission_run


def mission_run_report_retry(*, mission_run_id: int) -> MissionRun | None:
    """Try again a note that could not be emitted (claimed, so only one caller sends)."""
    if not MissionRun.objects.filter(
        pk=mission_run_id, report_state=MissionRun.Report.FAILED
    ).update(report_state=MissionRun.Report.SENDING):
        return None
    mission_run = MissionRun.objects.select_related("mission", "goal").get(pk=mission_run_id)
    _report(mission_run)
    return mission_run


def _summary(mission_run: MissionRun) -> str:
    name = mission_run.mission.name
    text = mission_run.outcome.strip()
    if mission_run.state == MissionRun.State.CONCLUDED:
        head = f"Mission “{name}” concluded."
    else:
        head = f"Mission “{name}” ended without a conclusion ({mission_run.outcome_code})."
    return f"{head}\n\n{text}" if text else head


def _report(mission_run: MissionRun) -> None:
    """The gardener's recently_concluded note, routed by the goal's origin. Caller claimed it
    (report_state sending); outside any transaction."""
    from operator_messages.gardener import conclude_durable_goal

    state, report = MissionRun.Report.FAILED, {}
    if mission_run.goal is None:
        report = {"code": "GOAL_GONE", "message": "The run's goal no longer exists."}
    else:
        try:
            result = conclude_durable_goal(mission_run.goal, _summary(mission_run))
        except Exception as exc:  # recorded and retried at the next due run, never lost
            log.warning("mission run %s: note not emitted", mission_run.pk, exc_info=True)
            report = {"code": "ERROR", "message": f"{type(exc).__name__}: {exc}"[:500]}
        else:
            if result.ok:
                state, report = MissionRun.Report.SENT, result.record or {}
            else:
                report = {"code": result.code, "message": result.message}
    MissionRun.objects.filter(pk=mission_run.pk).update(report_state=state, report=report)
    mission_run.report_state, mission_run.report = state, report


def mission_settle(*, mission_id: int) -> None:
    """Close the mission's active run if its work ended while the news was lost (a crash
    between a commit and its signal, a cleared history), and retry notes that failed."""
    active = (
        MissionRun.objects.filter(mission_id=mission_id, state=MissionRun.State.ACTIVE)
        .values_list("pk", flat=True)
        .first()
    )
    if active is not None:
        mission_run_conclude(mission_run_id=active)
    for pk in (
        MissionRun.objects.filter(mission_id=mission_id, report_state=MissionRun.Report.FAILED)
        .order_by("pk")
        .values_list("pk", flat=True)[:5]
    ):
        mission_run_report_retry(mission_run_id=pk)


def mission_run_work_ended(
    *, group_request_id: int | None = None, owner_message_id: int | None = None
) -> None:
    """A group request finished, or an owner turn was answered: when it was a mission's,
    conclude that run in a task after commit. One indexed read otherwise."""
    from .tasks import conclude_run

    runs = MissionRun.objects.filter(state=MissionRun.State.ACTIVE)
    if group_request_id is not None:
        runs = runs.filter(group_request_id=group_request_id)
    elif owner_message_id is not None:
        runs = runs.filter(
            owner_message_id=owner_message_id, mission__target_type=Mission.TargetType.AGENT
        )
    else:
        return
    pk = runs.values_list("pk", flat=True).first()
    if pk is not None:
        transaction.on_commit(lambda: conclude_run.delay(pk))
