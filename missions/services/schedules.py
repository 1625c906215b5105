"""A mission's schedule: the value the API and the admin give, the site's frequency limit, and
the beat entry (a django-celery-beat PeriodicTask) that sends the mission's due runs."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass

from celery.schedules import crontab
from django.conf import settings
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask, PeriodicTasks

from garden.errors import ServiceError
from missions.models import Mission
from missions.scheduling import RUN_MISSION

MIN_EVERY_SECONDS = 60
MAX_EVERY_SECONDS = 366 * 24 * 3600
CRONTAB_FIELDS = ("minute", "hour", "day_of_week", "day_of_month", "month_of_year")


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


# --- the check --------------------------------------------------------------------------------


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
        raise ServiceError(
            "SCHEDULE_TOO_FREQUENT",
            f"Missions run at most every {least} seconds "
            f"on this site; this schedule runs every {gap} seconds.",
            field="schedule",
        )


def crontab_min_gap_seconds(schedule: Schedule) -> int:
    """The shortest time between two runs of a crontab, from its minutes and hours (days only
    ever spread runs further apart)."""
    cron = crontab(minute=schedule.minute, hour=schedule.hour)
    times = sorted(h * 60 + m for h in cron.hour for m in cron.minute)
    if len(times) < 2:
        return 24 * 3600
    gaps = [b - a for a, b in itertools.pairwise(times)]
    gaps.append(times[0] + 24 * 60 - times[-1])
    return min(gaps) * 60


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


def periodic_task_save(mission: Mission, schedule: Schedule | None) -> PeriodicTask:
    """Create or update the mission's beat entry (task ``missions.run_mission``, kwargs
    ``{"mission_id": id}``); saved through ``save()`` so a running beat reloads. ``None`` keeps
    the entry's schedule. Caller holds the mission row (or just created it)."""
    task = mission.periodic_task or PeriodicTask()
    task.name = _task_name(mission)
    task.task = RUN_MISSION
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


def periodic_tasks_disable(task_ids: list[int]) -> None:
    """Disable these beat entries (of missions just disabled) and tell a running beat."""
    if task_ids:
        PeriodicTask.objects.filter(pk__in=task_ids).update(enabled=False, last_run_at=None)
        # update() skips PeriodicTask.save(), which is what tells a running beat to reload.
        PeriodicTasks.update_changed()


def mission_periodic_task_delete(*, periodic_task_id: int | None) -> None:
    if periodic_task_id is not None:
        PeriodicTask.objects.filter(pk=periodic_task_id).delete()
