"""The gardener: the system-owned actor that tends the garden and leaves the operator notes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from garden.models import Goal
from garden.runtime import GARDENER
from garden.services.runs import goal_conclude, goal_create
from operator_messages.driver import ActiveRun, run_goal

from .emit import EmitResult, OperatorMessageFailed, emit_recently_concluded, emit_tend_survey
from .pending import recover
from .selectors import last_survey_at, survey_collect
from .survey import Survey, Thresholds, render_survey

DURABLE_KINDS = (Goal.Kind.DURABLE, Goal.Kind.MISSION)


@dataclass(frozen=True)
class TendWork:
    survey: Survey
    note: EmitResult | None

    def outcome(self) -> dict[str, Any]:
        return {**self.survey.outcome(), "note_written": self.note is not None}


@dataclass(frozen=True)
class TendResult:
    run_id: str
    survey: Survey
    note: EmitResult | None
    finished_event: dict[str, Any]

    @property
    def note_path(self) -> str | None:
        return self.finished_event["operator_note_path"]


def tend(
    *,
    now: datetime | None = None,
    thresholds: Thresholds | None = None,
    note_when_quiet: bool = False,
) -> TendResult:
    """One tend: a system-owned tend goal and one run of it that surveys the garden and, when
    something needs attention (or ``note_when_quiet``), leaves one tend_survey note.

    Raises OperatorMessageFailed when the note could not be written; the run and goal are
    then failed.
    """
    # Emissions a crash interrupted (a record not appended, a file not put in place, a temp
    # whose turn never committed): every tend finishes or removes them.
    recover()
    limits = thresholds or Thresholds()
    goal = goal_create(kind=Goal.Kind.TEND, title="gardener: tend")

    def survey_and_note(active: ActiveRun) -> TendWork:
        at = now or timezone.now()
        since = last_survey_at(exclude_run_id=active.run.run_id) or at - limits.first_lookback
        survey = survey_collect(
            now=at, since=since, thresholds=limits, exclude_run_id=active.run.run_id
        )
        if survey.is_quiet and not note_when_quiet:
            # Every fifteen minutes, an all-quiet note would bury the ones that matter.
            return TendWork(survey=survey, note=None)
        note = emit_tend_survey(render_survey(survey))
        if not note.ok:
            raise OperatorMessageFailed(note)
        return TendWork(survey=survey, note=note)

    try:
        result = run_goal(goal, GARDENER, survey_and_note, describe=TendWork.outcome)
    except BaseException:
        goal_conclude(goal=goal, status=Goal.Status.FAILED)
        raise
    goal_conclude(goal=goal, status=Goal.Status.CONCLUDED)
    assert result.tend_finished is not None  # run_goal always reports a tend run's end
    return TendResult(
        run_id=result.run.run_id,
        survey=result.value.survey,
        note=result.value.note,
        finished_event=result.tend_finished,
    )


def conclude_durable_goal(goal: Goal, summary: str) -> EmitResult:
    """Conclude a durable (or mission) goal and tell the operator, in a gardener run of it.

    The note goes where the goal's origin says: its conversation, or notes/. When the note
    cannot be emitted the goal stays open and the rejection is returned, so it can be retried.
    """

    def note(active: ActiveRun) -> EmitResult:
        result = emit_recently_concluded(summary)
        if not result.ok:
            raise OperatorMessageFailed(result)
        return result

    try:
        done = run_goal(
            goal, GARDENER, note, describe=lambda r: {"operator_message": r.record or {}}
        )
    except OperatorMessageFailed as failed:
        return failed.result
    goal_conclude(goal=goal, status=Goal.Status.CONCLUDED)
    return done.value
