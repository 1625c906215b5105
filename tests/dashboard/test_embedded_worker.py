"""The embedded default's worker (dashboard/serving.py): a real Celery worker in threads of
the serving process, started again when it stops on its own, and a process that gives up
loudly rather than serve pages nothing answers; on start it puts back what a killed process
left running."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.serving import EmbeddedWorker
from garden import heartbeat
from garden.models import WorkerBeat
from groups.demo import household_finances
from groups.models import GroupRequest
from groups.services.requests import request_create, request_start_next
from tests.conftest import _wait_until_worker_idle, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def answered(request) -> bool:
    request.refresh_from_db()
    return request.state == GroupRequest.State.COMPLETED


@pytest.fixture(autouse=True)
def _empty_broker():
    from config.celery import app

    app.control.purge()


def test_a_worker_that_stops_on_its_own_is_started_again_and_answers(owner):
    group = household_finances(owner)
    with EmbeddedWorker(concurrency=2, beat=False, give_up=pytest.fail) as embedded:
        first = request_create(group=group, text="How much can I save?")
        wait_for(lambda: answered(first), timeout=30)
        embedded.worker.stop()  # as Celery does after an unrecoverable error
        wait_for(lambda: embedded.started == 2, timeout=10)
        second = request_create(group=group, text="And next month?")
        wait_for(lambda: answered(second), timeout=30)
        _wait_until_worker_idle()


def test_a_worker_that_keeps_stopping_gives_up_loudly(owner):
    reasons: list[str] = []
    with EmbeddedWorker(concurrency=1, beat=False, restarts=1, give_up=reasons.append) as embedded:
        embedded.worker.stop()
        wait_for(lambda: embedded.started == 2, timeout=10)
        embedded.worker.stop()
        wait_for(lambda: reasons, timeout=10)
    assert "stopped 2 times" in reasons[0]
    assert embedded.started == 2, "not started a third time"


def test_a_request_a_killed_process_left_running_is_put_back_on_its_way_at_start(owner):
    group = household_finances(owner)
    request = request_create(group=group, text="How much can I save?")
    request_start_next(group_id=group.pk)
    # As a process killed mid-step leaves it: a step claimed, never completed, nothing queued.
    GroupRequest.objects.filter(pk=request.pk).update(fence=1, completed_fence=0)
    from config.celery import app

    app.control.purge()
    with EmbeddedWorker(concurrency=2, beat=False, give_up=pytest.fail):
        wait_for(lambda: answered(request), timeout=30)
        _wait_until_worker_idle()


def test_the_embedded_worker_beats_while_it_runs_and_leaves_when_it_stops(owner):
    with EmbeddedWorker(concurrency=1, beat=False, give_up=pytest.fail) as embedded:
        beat = wait_for(lambda: WorkerBeat.objects.filter(embedded=True).first(), timeout=10)
        assert beat.hostname == embedded.worker.hostname and heartbeat.workers_alive()
    assert not WorkerBeat.objects.exists() and not heartbeat.workers_alive()


def test_the_embedded_layout_runs_beat_with_the_sweeper_and_missions_schedules(owner):
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    # A schedule of the database scheduler's, as each mission's is: beat in this process
    # sends it and the worker beside it runs it. Here, the sweeper every second.
    every_second = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.create(
        name="probe: sweep every second", task="groups.sweep_requests", interval=every_second
    )
    group = household_finances(owner)
    request = request_create(group=group, text="How much can I save?")
    request_start_next(group_id=group.pk)
    # Stranded long ago, past the sweep's age: only a sweep sent by beat puts it back.
    GroupRequest.objects.filter(pk=request.pk).update(
        fence=1, completed_fence=0, updated_at=timezone.now() - timedelta(hours=1)
    )
    from config.celery import app

    app.control.purge()
    with EmbeddedWorker(concurrency=2, sweep_on_start=False, give_up=pytest.fail) as embedded:
        assert embedded._beat.is_alive()
        wait_for(lambda: answered(request), timeout=30)
        # The built-in schedule (the sweeper every minute, the purge) is installed too.
        assert PeriodicTask.objects.filter(name="groups: sweep stranded requests").exists()
        _wait_until_worker_idle()
    assert not embedded._beat.is_alive()
