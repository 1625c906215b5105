"""Reads for the gardener's tend survey, across every owner (the gardener is system-owned)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q

from garden.models import Conversation, Goal, Message, Run
from groups.models import Approval, Group, GroupRequest

from .survey import (
    FailedRequest,
    FailedRun,
    NearRollover,
    PendingApproval,
    StuckRequest,
    Survey,
    Thresholds,
)

# Requests a worker should be moving; awaiting_approval waits on a person, not on us.
MOVING_STATES = (GroupRequest.State.RUNNING, GroupRequest.State.SYNTHESIZING)


def last_survey_at(*, exclude_run_id: str | None = None) -> datetime | None:
    """When the last successful tend run started: failures since then are news."""
    runs = Run.objects.filter(goal__kind=Goal.Kind.TEND, status=Run.Status.SUCCEEDED)
    if exclude_run_id:
        runs = runs.exclude(run_id=exclude_run_id)
    return runs.order_by("-started_at").values_list("started_at", flat=True).first()


def stuck_requests(*, now: datetime, thresholds: Thresholds) -> tuple[StuckRequest, ...]:
    rows = (
        GroupRequest.objects.filter(
            state__in=MOVING_STATES, updated_at__lt=now - thresholds.stuck_after
        )
        .select_related("group")
        .order_by("updated_at")
    )
    return tuple(
        StuckRequest(
            request_id=r.pk,
            group_id=r.group_id,
            group_name=r.group.name,
            state=r.state,
            idle_since=r.updated_at,
        )
        for r in rows
    )


def failed_requests(*, since: datetime) -> tuple[FailedRequest, ...]:
    rows = (
        GroupRequest.objects.filter(state=GroupRequest.State.FAILED)
        .filter(Q(finished_at__gte=since) | Q(finished_at__isnull=True, updated_at__gte=since))
        .select_related("group")
        .order_by("id")
    )
    return tuple(
        FailedRequest(
            request_id=r.pk,
            group_id=r.group_id,
            group_name=r.group.name,
            outcome_code=r.outcome_code,
            finished_at=r.finished_at,
        )
        for r in rows
    )


def pending_approvals(*, now: datetime, thresholds: Thresholds) -> tuple[PendingApproval, ...]:
    rows = (
        Approval.objects.filter(
            status=Approval.Status.PENDING, created_at__lt=now - thresholds.approval_pending_after
        )
        .select_related("agent")
        .order_by("created_at")
    )
    return tuple(
        PendingApproval(
            approval_id=a.pk,
            agent_name=a.agent.name,
            action_name=str(a.action.get("name", "?")) if isinstance(a.action, dict) else "?",
            created_at=a.created_at,
        )
        for a in rows
    )


def text_chars(content: object) -> int:
    """Characters of the text blocks of one message's content."""
    if not isinstance(content, list):
        return 0
    return sum(
        len(block["text"])
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )


def near_rollover(*, thresholds: Thresholds) -> tuple[NearRollover, ...]:
    """Groups whose open conversation's text has reached the ratio of their room cap."""
    found = []
    conversations = (
        Conversation.objects.filter(
            group__isnull=False, group__deleted_at__isnull=True, status=Conversation.Status.OPEN
        )
        .select_related("group")
        .order_by("group_id", "id")
    )
    for conversation in conversations:
        group: Group = conversation.group
        contents = (
            Message.objects.filter(conversation=conversation)
            .values_list("content", flat=True)
            .iterator(chunk_size=500)
        )
        used = sum(text_chars(content) for content in contents)
        if group.room_cap_chars and used >= thresholds.rollover_ratio * group.room_cap_chars:
            found.append(
                NearRollover(
                    group_id=group.pk,
                    group_name=group.name,
                    used_chars=used,
                    cap_chars=group.room_cap_chars,
                )
            )
    return tuple(found)


def failed_runs(*, since: datetime, exclude_run_id: str | None = None) -> tuple[FailedRun, ...]:
    rows = (
        Run.objects.filter(status=Run.Status.FAILED, finished_at__gte=since)
        .select_related("goal")
        .order_by("finished_at")
    )
    if exclude_run_id:
        rows = rows.exclude(run_id=exclude_run_id)
    return tuple(
        FailedRun(
            run_id=r.run_id,
            goal_kind=r.goal.kind,
            actor=r.actor,
            error=str(r.outcome.get("error", "")) if isinstance(r.outcome, dict) else "",
        )
        for r in rows
    )


def survey_collect(
    *,
    now: datetime,
    since: datetime,
    thresholds: Thresholds,
    exclude_run_id: str | None = None,
) -> Survey:
    return Survey(
        surveyed_at=now,
        since=since,
        thresholds=thresholds,
        stuck_requests=stuck_requests(now=now, thresholds=thresholds),
        failed_requests=failed_requests(since=since),
        pending_approvals=pending_approvals(now=now, thresholds=thresholds),
        near_rollover=near_rollover(thresholds=thresholds),
        failed_runs=failed_runs(since=since, exclude_run_id=exclude_run_id),
    )
