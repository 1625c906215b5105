"""Reads of missions. Every selector that takes an owner returns only that owner's rows."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Prefetch, QuerySet

from garden.errors import is_row_id

from .models import Mission, MissionRun

RUNS_LISTED = 50


def _with_details(qs: QuerySet[Mission]) -> QuerySet[Mission]:
    latest = MissionRun.objects.select_related("run").order_by("-id")[:1]
    return qs.select_related(
        "target_agent",
        "target_group",
        "periodic_task__interval",
        "periodic_task__crontab",
    ).prefetch_related(Prefetch("runs", queryset=latest, to_attr="latest_runs"))


def mission_list(*, owner: AbstractBaseUser) -> QuerySet[Mission]:
    return _with_details(Mission.objects.filter(owner=owner))


def mission_get(*, owner: AbstractBaseUser, mission_id: int) -> Mission | None:
    if not is_row_id(mission_id):
        return None
    return _with_details(Mission.objects.filter(owner=owner, pk=mission_id)).first()


def mission_run_list(*, mission: Mission, limit: int = RUNS_LISTED) -> QuerySet[MissionRun]:
    """The mission's latest runs, newest first."""
    return MissionRun.objects.filter(mission=mission).select_related("run").order_by("-id")[:limit]


def mission_last_run(mission: Mission) -> MissionRun | None:
    latest = getattr(mission, "latest_runs", None)
    if latest is not None:
        return latest[0] if latest else None
    return MissionRun.objects.filter(mission=mission).select_related("run").order_by("-id").first()
