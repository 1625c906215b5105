"""The gardener's tend survey as plain data, and its rendering as the note's text (no ORM)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any


@dataclass(frozen=True)
class Thresholds:
    """When something is worth the operator's attention."""

    stuck_after: timedelta = timedelta(minutes=30)
    approval_pending_after: timedelta = timedelta(hours=1)
    rollover_ratio: float = 0.8
    # How far back the first survey looks for failures, having no earlier survey to start from.
    first_lookback: timedelta = timedelta(hours=24)


@dataclass(frozen=True)
class StuckRequest:
    request_id: int
    group_id: int
    group_name: str
    state: str
    idle_since: datetime


@dataclass(frozen=True)
class FailedRequest:
    request_id: int
    group_id: int
    group_name: str
    outcome_code: str
    finished_at: datetime | None


@dataclass(frozen=True)
class PendingApproval:
    approval_id: int
    agent_name: str
    action_name: str
    created_at: datetime


@dataclass(frozen=True)
class NearRollover:
    group_id: int
    group_name: str
    used_chars: int
    cap_chars: int


@dataclass(frozen=True)
class FailedRun:
    run_id: str
    goal_kind: str
    actor: str
    error: str


@dataclass(frozen=True)
class Survey:
    surveyed_at: datetime
    since: datetime
    stuck_requests: tuple[StuckRequest, ...] = ()
    failed_requests: tuple[FailedRequest, ...] = ()
    pending_approvals: tuple[PendingApproval, ...] = ()
    near_rollover: tuple[NearRollover, ...] = ()
    failed_runs: tuple[FailedRun, ...] = ()
    thresholds: Thresholds = field(default_factory=Thresholds)

    @property
    def is_quiet(self) -> bool:
        return not any(self.counts().values())

    def counts(self) -> dict[str, int]:
        return {
            "stuck_requests": len(self.stuck_requests),
            "failed_requests": len(self.failed_requests),
            "pending_approvals": len(self.pending_approvals),
            "near_rollover": len(self.near_rollover),
            "failed_runs": len(self.failed_runs),
        }

    def outcome(self) -> dict[str, Any]:
        return {"since": self.since.isoformat(), "findings": self.counts()}


def _age(now: datetime, then: datetime) -> str:
    minutes = max(0, int((now - then).total_seconds() // 60))
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def render_survey(survey: Survey) -> str:
    """The note's markdown: one section per kind of finding, or a single all-quiet line."""
    now = survey.surveyed_at
    lines = [f"# Tend survey, {now:%Y-%m-%d %H:%M} UTC", ""]
    if survey.is_quiet:
        lines.append(f"Nothing needs your attention since {survey.since:%Y-%m-%d %H:%M} UTC.")
        return "\n".join(lines) + "\n"
    if survey.stuck_requests:
        lines += ["## Requests that look stuck", ""]
        lines += [
            f"- Request {r.request_id} in {r.group_name} (group {r.group_id}): "
            f"{r.state}, no progress for {_age(now, r.idle_since)}"
            for r in survey.stuck_requests
        ]
        lines.append("")
    if survey.failed_requests:
        lines += [f"## Requests that failed since {survey.since:%Y-%m-%d %H:%M} UTC", ""]
        lines += [
            f"- Request {r.request_id} in {r.group_name} (group {r.group_id}): "
            f"{r.outcome_code or 'failed'}"
            for r in survey.failed_requests
        ]
        lines.append("")
    if survey.pending_approvals:
        lines += ["## Approvals waiting for a decision", ""]
        lines += [
            f"- Approval {a.approval_id}: {a.agent_name} wants to run {a.action_name}, "
            f"waiting {_age(now, a.created_at)}"
            for a in survey.pending_approvals
        ]
        lines.append("")
    if survey.near_rollover:
        lines += ["## Groups near their rollover cap", ""]
        lines += [
            f"- {g.group_name} (group {g.group_id}): {g.used_chars:,} of "
            f"{g.cap_chars:,} characters ({g.used_chars * 100 // max(g.cap_chars, 1)}%)"
            for g in survey.near_rollover
        ]
        lines.append("")
    if survey.failed_runs:
        lines += ["## Runs that failed", ""]
        lines += [
            f"- Run {r.run_id} ({r.goal_kind} goal, {r.actor}): {r.error or 'failed'}"
            for r in survey.failed_runs
        ]
        lines.append("")
    return "\n".join(lines)
