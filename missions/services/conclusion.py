"""The end of a mission run: close it when its work has ended (its group request finished, or
its owner turn was answered), then have the gardener leave its recently_concluded note; settle
a run whose end was not heard, and retry notes that could not be emitted."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from garden.models import Goal, Message, Run
from garden.services.runs import goal_conclude, run_finish
from groups.models import GroupRequest
from missions.models import Mission, MissionRun
from missions.scheduling import conclude_run_on_commit
from operator_messages.gardener import conclude_durable_goal

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Ending:
    ok: bool
    code: str
    text: str


def _ending_of(mission_run: MissionRun) -> _Ending | None:
    """How the run's work ended, or None while it goes on."""
    # Group missions, and agent missions since 1:1 messages run on the group loop.
    if (
        mission_run.mission.target_type == Mission.TargetType.GROUP
        or mission_run.group_request_id is not None
    ):
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
    # An agent mission's run from before: its owner turn answered by a reply.
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
            MissionRun.objects.select_for_update(of=("self",), no_key=True)
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
        conclude_run_on_commit(mission_run_id=pk)
