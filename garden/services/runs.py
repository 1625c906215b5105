"""Writes for goals and their runs: create a goal, start and finish a run, conclude a goal."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from garden.models import Goal, Run
from garden.runtime import run_directory


def goal_create(
    *,
    kind: str,
    owner: AbstractBaseUser | None = None,
    title: str = "",
    origin: Any = None,
) -> Goal:
    """Create an open goal. ``owner`` None makes it system-owned (the gardener's)."""
    if kind not in Goal.Kind.values:
        raise ValueError(f"unknown goal kind {kind!r}")
    return Goal.objects.create(kind=kind, owner=owner, title=title, origin=origin)


def run_start(*, goal: Goal, actor: str) -> Run:
    """Start one run of ``goal``: a fresh run id and its directory under the runtime root."""
    if not actor:
        raise ValueError("a run needs an actor")
    run_id = uuid.uuid4().hex
    directory = run_directory(run_id)
    # The directory exists before the row does, so nothing ever sees a run without one.
    directory.mkdir(parents=True, exist_ok=False)
    return Run.objects.create(run_id=run_id, goal=goal, actor=actor, directory=str(directory))


def run_finish(*, run: Run, status: str, outcome: dict[str, Any] | None = None) -> bool:
    """Finish a running run once; returns False (and changes nothing) if it already finished."""
    if status not in (Run.Status.SUCCEEDED, Run.Status.FAILED):
        raise ValueError(f"a run finishes as succeeded or failed, not {status!r}")
    now = timezone.now()
    outcome = outcome or {}
    # Conditional on still running, so a redelivered finish cannot overwrite the first.
    changed = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
        status=status,
        outcome=outcome,
        finished_at=now,
    )
    if changed:
        run.status, run.outcome, run.finished_at = status, outcome, now
    return bool(changed)


def goal_conclude(*, goal: Goal, status: str) -> bool:
    """Close an open goal as concluded or failed; returns False if it was already closed."""
    if status not in (Goal.Status.CONCLUDED, Goal.Status.FAILED):
        raise ValueError(f"a goal concludes as concluded or failed, not {status!r}")
    now = timezone.now()
    changed = Goal.objects.filter(pk=goal.pk, status=Goal.Status.OPEN).update(
        status=status,
        concluded_at=now,
    )
    if changed:
        goal.status, goal.concluded_at = status, now
    return bool(changed)
