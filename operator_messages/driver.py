"""The run driver: start a run of a goal, hold its run context while the work runs, finish it.

A tend run ends with a tend-finished event whose note fields come from the run's validated
operator-message records, not from looking at the inbox.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from rest_framework import serializers

from garden import events
from garden.models import Goal, Run
from garden.runtime import RunContext, context_to_env, run_context, runtime_root
from garden.services.runs import run_finish, run_start
from operator_messages.records import read_operator_message_log

log = logging.getLogger(__name__)

T = TypeVar("T")

OPERATOR_CHANNEL = "garden-operator"


class TendFinishedEvent(serializers.Serializer):
    """A tend run ended; its note fields come from the run's valid tend_survey records."""

    type = serializers.ChoiceField(choices=["tend.finished"])
    goal_id = serializers.IntegerField()
    run_id = serializers.CharField()
    status = serializers.CharField()
    operator_note_written = serializers.BooleanField()
    operator_note_path = serializers.CharField(allow_null=True)
    invalid_record_lines = serializers.IntegerField()


@dataclass(frozen=True)
class ActiveRun:
    """What the work of a run is handed: the run row and its trusted context."""

    run: Run
    context: RunContext

    @property
    def env(self) -> dict[str, str]:
        """Environment entries that give a subprocess this run's context."""
        return context_to_env(self.context)


@dataclass(frozen=True)
class RunResult(Generic[T]):
    run: Run
    value: T
    tend_finished: dict[str, Any] | None = None


def run_goal(
    goal: Goal,
    actor: str,
    fn: Callable[[ActiveRun], T],
    *,
    describe: Callable[[T], dict[str, Any]] | None = None,
    group_id: int | None = None,
    agent_id: int | None = None,
) -> RunResult[T]:
    """Run ``fn`` as one run of ``goal`` by ``actor``, inside that run's context.

    The run finishes succeeded with ``describe(value)`` (or the value itself when it is a
    dict) as its outcome, or failed with the error when ``fn`` raises, which is re-raised.
    Opens no transaction: ``fn`` may call models.
    """
    run = run_start(goal=goal, actor=actor)
    ctx = RunContext(
        goal_id=goal.pk,
        run_id=run.run_id,
        goal_kind=goal.kind,
        actor=actor,
        origin=goal.origin,
        group_id=group_id,
        agent_id=agent_id,
        owner_id=goal.owner_id,
    )
    try:
        with run_context(ctx):
            value = fn(ActiveRun(run=run, context=ctx))
        if describe is not None:
            outcome = describe(value)
        else:
            outcome = value if isinstance(value, dict) else {}
    except BaseException as exc:
        # BaseException too: a worker's time limit or shutdown still leaves the run failed.
        run_finish(
            run=run,
            status=Run.Status.FAILED,
            outcome={"error": f"{type(exc).__name__}: {exc}"[:1000]},
        )
        if goal.kind == Goal.Kind.TEND:
            _emit_tend_finished(run)
        raise
    run_finish(run=run, status=Run.Status.SUCCEEDED, outcome=outcome)
    finished = _emit_tend_finished(run) if goal.kind == Goal.Kind.TEND else None
    return RunResult(run=run, value=value, tend_finished=finished)


def _emit_tend_finished(run: Run) -> dict[str, Any]:
    """Push and log the tend-finished event of ``run`` and return it.

    ``operator_note_written`` and ``operator_note_path`` come from the run's valid
    tend_survey records; invalid lines are skipped and counted.
    """
    try:
        record_log = read_operator_message_log(run.run_id)
        records, invalid = record_log.records, len(record_log.invalid)
    except OSError:
        log.warning("operator-message records of run %s unreadable", run.run_id, exc_info=True)
        records, invalid = [], 0
    surveys = [record for record in records if record["kind"] == "tend_survey"]
    last = surveys[-1] if surveys else None
    path = (
        str(runtime_root() / last["delivery_path"])
        if last is not None and "delivery_path" in last
        else None
    )
    event = {
        "type": "tend.finished",
        "goal_id": run.goal_id,
        "run_id": run.run_id,
        "status": run.status,
        "operator_note_written": last is not None,
        "operator_note_path": path,
        "invalid_record_lines": invalid,
    }
    log.info("tend finished: %s", json.dumps(event))
    events.send_event_on_commit(channel=OPERATOR_CHANNEL, event=event)
    return event
