"""Beat: django-celery-beat's DatabaseScheduler sees a mission's entry as due once its time has
come (time moved by setting last_run_at back), and its tick sends the run to a real worker."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from django_celery_beat.models import PeriodicTask, PeriodicTasks
from django_celery_beat.schedulers import DatabaseScheduler

from missions.models import MissionRun
from missions.services import mission_update
from tests.conftest import wait_for
from tests.groups.conftest import make_group
from tests.missions.conftest import make_mission, notes


def test_the_beat_scheduler_sends_a_mission_when_it_falls_due(celery_worker_thread, owner, runtime):
    group = make_group(
        owner, concierge_rules=[{"reply": "Nothing to report this hour."}], members={"ledger": []}
    )
    mission = make_mission(owner, group)
    task = mission.periodic_task
    # Only this entry, so the tick below can only send the mission.
    PeriodicTask.objects.exclude(pk=task.pk).update(enabled=False)
    PeriodicTasks.update_changed()

    scheduler = DatabaseScheduler(app=celery_worker_thread, lazy=True)
    entry = scheduler.schedule[task.name]
    assert (entry.task, entry.kwargs) == ("missions.run_mission", {"mission_id": mission.pk})
    assert entry.is_due().is_due is False  # just created: due an hour from now

    PeriodicTask.objects.filter(pk=task.pk).update(last_run_at=timezone.now() - timedelta(hours=2))
    PeriodicTasks.update_changed()
    scheduler = DatabaseScheduler(app=celery_worker_thread, lazy=True)
    assert scheduler.schedule[task.name].is_due().is_due is True

    assert scheduler.tick() == 0  # sent one due entry
    mission_run = wait_for(
        lambda: MissionRun.objects.filter(mission=mission, report_state="sent").first(), timeout=30
    )
    assert (mission_run.state, mission_run.trigger) == ("concluded", "schedule")
    assert mission_run.outcome == "Nothing to report this hour."
    assert len(notes(runtime)) == 1
    scheduler.sync()  # beat records the send on the entry
    assert PeriodicTask.objects.get(pk=task.pk).total_run_count == 1


def test_a_disabled_mission_is_not_among_the_schedulers_entries(transactional_db, owner):
    # The scheduler closes connections between reads, as beat does: no wrapping transaction.
    from config.celery import app

    group = make_group(owner, concierge_rules=[], members={"ledger": []})
    mission = make_mission(owner, group)
    mission_update(mission=mission, enabled=False)
    scheduler = DatabaseScheduler(app=app, lazy=True)
    assert mission.periodic_task.name not in scheduler.schedule
    mission_update(mission=mission, enabled=True)
    scheduler = DatabaseScheduler(app=app, lazy=True)
    assert mission.periodic_task.name in scheduler.schedule
