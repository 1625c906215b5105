"""One beat sends the schedule, however many run (garden/beat.py): real ``celery -A config beat``
processes on one site, an entry due every second on a queue of its own that no worker reads,
and the messages on the broker counted by the process that sent them (a message's ``origin``
header names it). Two beats: every message from one of them. The sender SIGKILLed: the other
takes over once the lease lapses, and does not send again what the dead one sent. The sender
stopped warm (a rolling update): the next beat takes over at its next ask. All stopped: the
beat's liveness metric shows the last tick."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from celery.beat import EmbeddedService
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask
from prometheus_client.parser import text_string_to_metric_families

from config.celery import app as celery_app
from garden.beat import LEASE_NAME, LeasedScheduler, lease_release, lease_take
from garden.metrics_exposition import exposition
from garden.models import BeatLease
from garden.redis_conn import redis_client
from tests.support.databases import database_url
from tests.support.processes import ROOT, interruptible
from tests.support.workers import wait_for

QUEUE = "garden-beat-probe"
HOURLY = "garden-beat-hourly"
LEASE, RENEW = 4.0, 1.0
AGE = "garden_beat_last_tick_age_seconds"


def _messages(queue: str) -> list[Path]:
    """The filesystem broker's messages on ``queue``, oldest first (the embedded default)."""
    folder = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
    return sorted(folder.glob(f"*.{queue}.msg"))


def senders(queue: str = QUEUE) -> list[str]:
    """The ``origin`` of every message on ``queue``, oldest first."""
    if settings.REDIS_URL:
        raw = reversed(redis_client().lrange(queue, 0, -1))  # LPUSHed: newest first
    else:
        raw = (path.read_bytes() for path in _messages(queue))
    return [json.loads(message)["headers"]["origin"] for message in raw]


def clear(*queues: str) -> None:
    for queue in queues:
        if settings.REDIS_URL:
            redis_client().delete(queue)
        else:
            for path in _messages(queue):
                path.unlink()


def origin(proc: subprocess.Popen) -> str:
    """How celery names a process that sends a task: gen<pid>@<host>."""
    return f"gen{proc.pid}@"


def sent_by(names: list[str], proc: subprocess.Popen) -> int:
    return sum(name.startswith(origin(proc)) for name in names)


def age_scraped() -> float | None:
    for family in text_string_to_metric_families(exposition().decode()):
        for sample in family.samples:
            if sample.name == AGE:
                return sample.value
    return None


@pytest.fixture
def probe():
    """The entry: a task name no worker needs, every second, on a queue of its own."""
    clear(QUEUE, HOURLY)
    every = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.create(
        name="one beat probe", task="garden.beat_probe", interval=every, queue=QUEUE
    )
    yield
    clear(QUEUE, HOURLY)


@pytest.fixture
def beats(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "GARDEN_BEAT_LEASE_SECONDS": str(LEASE),
        "GARDEN_BEAT_RENEW_SECONDS": str(RENEW),
        "GARDEN_LOG_LEVEL": "INFO",
    }
    started: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        n = len(started)
        log = open(tmp_path / f"beat-{n}.log", "wb")
        files = (f"--pidfile={tmp_path / f'beat-{n}.pid'}", f"-s={tmp_path / f'beat-{n}'}")
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel=info", *files],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=interruptible,
        )
        log.close()
        started.append(proc)
        return proc

    connections.close_all()
    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def holder_pid() -> int | None:
    holder = BeatLease.objects.filter(name=LEASE_NAME).values_list("holder", flat=True).first()
    return int(holder.split(":")[1]) if holder else None


def stop(proc: subprocess.Popen, sig: signal.Signals) -> None:
    proc.send_signal(sig)
    proc.wait(timeout=30)


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
def test_two_beats_send_each_entry_once_and_the_other_takes_over(beats, probe):
    first, second = beats(), beats()

    # Several periods sent, every one by the same beat: the other sent nothing.
    def six_periods_sent():
        return len(found := senders()) >= 6 and found

    names = wait_for(six_periods_sent, timeout=60, interval=0.2)
    by = {proc: sent_by(names, proc) for proc in (first, second)}
    assert sum(by.values()) == len(names), names
    holder, standby = (first, second) if by[first] else (second, first)
    assert by[standby] == 0 and by[holder] == len(names), names
    assert holder_pid() == holder.pid

    # An hourly entry added (from the admin, say), last run two hours ago: due once, at once.
    hourly = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.HOURS)
    PeriodicTask.objects.create(
        name="one beat hourly",
        task="garden.beat_probe",
        interval=hourly,
        queue=HOURLY,
        last_run_at=timezone.now() - timedelta(hours=2),
    )

    def the_hourly_sent():
        return senders(HOURLY)

    wait_for(the_hourly_sent, timeout=30, interval=0.2)
    ticks = len(senders())

    def the_holder_ticked_again():  # the tick that sent the hourly entry has ended
        return len(senders()) > ticks

    wait_for(the_holder_ticked_again, timeout=20, interval=0.2)

    # The holder dies: nothing releases the lease; the other takes it once it lapses and sends.
    stop(holder, signal.SIGKILL)
    before = len(senders())

    # A generous bound: the lease, an ask, a period, and slack for a loaded machine.
    def the_standby_sends():
        return sent_by(senders()[before:], standby)

    wait_for(the_standby_sends, timeout=LEASE + RENEW + 20, interval=0.2)
    after = senders()[before:]
    assert sent_by(after, standby) == len(after), after
    assert holder_pid() == standby.pid

    # The hourly entry the dead holder sent is not sent again: it recorded the run as it sent
    # it, and the taker read the schedule afresh.
    def the_standby_ticked_twice():
        return sent_by(senders()[before:], standby) >= 2

    wait_for(the_standby_ticked_twice, timeout=20, interval=0.2)
    hourly = senders(HOURLY)
    assert len(hourly) == 1 and sent_by(hourly, holder) == 1, hourly

    # A rolling update: a new beat starts, the holder stops warm and gives the lease up, and
    # the new one sends from its next ask on.
    new = beats()
    stop(standby, signal.SIGTERM)
    assert holder_pid() is None  # released on shutdown
    before = len(senders())

    def the_new_beat_sends():
        return sent_by(senders()[before:], new)

    wait_for(the_new_beat_sends, timeout=RENEW + 20, interval=0.2)
    after = senders()[before:]
    assert sent_by(after, new) == len(after), after

    # Every beat gone: the last tick stays where it was, and its age grows past the alert's
    # three minutes as time passes (here: as the row is moved back four).
    stop(new, signal.SIGTERM)
    stopped_at = timezone.now()
    ticked_at = BeatLease.objects.get(name=LEASE_NAME).ticked_at
    assert ticked_at <= stopped_at
    assert age_scraped() >= (timezone.now() - stopped_at).total_seconds()
    BeatLease.objects.filter(name=LEASE_NAME).update(ticked_at=ticked_at - timedelta(minutes=4))
    assert age_scraped() > 180


@pytest.mark.django_db(transaction=True)
def test_the_lease_is_held_by_one_until_it_lapses_or_is_given_up():
    assert age_scraped() is None  # no beat ever ticked: no age (the alert's absent())
    assert lease_take(holder="a", seconds=30)
    assert not lease_take(holder="b", seconds=30)
    assert lease_take(holder="a", seconds=30)  # renewed
    lease = BeatLease.objects.get(name=LEASE_NAME)
    assert lease.holder == "a" and lease.expires_at > lease.ticked_at
    assert age_scraped() is not None

    BeatLease.objects.filter(name=LEASE_NAME).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )  # a lapses (its beat died)
    assert lease_take(holder="b", seconds=30)
    assert not lease_take(holder="a", seconds=30)
    assert not lease_release(holder="a")
    assert lease_release(holder="b")
    assert lease_take(holder="a", seconds=30)  # given up: taken at once
    assert BeatLease.objects.count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_the_embedded_beat_holds_the_lease_and_gives_it_up_when_it_stops(settings):
    """The embedded default's beat, a thread of the web process (dashboard/serving.py)."""
    settings.GARDEN_BEAT_LEASE_SECONDS, settings.GARDEN_BEAT_RENEW_SECONDS = LEASE, RENEW
    beat = EmbeddedService(celery_app, thread=True, scheduler_cls=settings.CELERY_BEAT_SCHEDULER)
    beat.start()
    try:

        def this_process_holds_it():
            return holder_pid() == os.getpid()

        wait_for(this_process_holds_it, timeout=30, interval=0.2)
    finally:
        beat.stop()
    assert holder_pid() is None
    assert BeatLease.objects.get(name=LEASE_NAME).ticked_at is not None


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_an_entry_sent_is_not_sent_again_when_the_schedule_is_read_again(settings, probe):
    """A schedule change read in the middle of a tick makes the next tick rebuild its heap from
    the schedule: the entry just sent is there with its new run, so it is not due again."""
    settings.GARDEN_BEAT_LEASE_SECONDS, settings.GARDEN_BEAT_RENEW_SECONDS = LEASE, RENEW
    PeriodicTask.objects.create(
        name="one beat hourly",
        task="garden.beat_probe",
        interval=IntervalSchedule.objects.create(every=1, period=IntervalSchedule.HOURS),
        queue=HOURLY,
        last_run_at=timezone.now() - timedelta(hours=2),
    )
    scheduler = LeasedScheduler(app=celery_app)
    try:
        for _ in range(20):
            scheduler.tick()
            if senders(HOURLY):
                break
        assert len(senders(HOURLY)) == 1
        scheduler.populate_heap()  # what the rebuild does
        for _ in range(5):
            scheduler.tick()
        assert len(senders(HOURLY)) == 1
    finally:
        scheduler.close()
    assert holder_pid() is None


def test_a_renewal_not_shorter_than_the_lease_stops_beat_at_start(settings):
    settings.GARDEN_BEAT_LEASE_SECONDS, settings.GARDEN_BEAT_RENEW_SECONDS = 10.0, 10.0
    with pytest.raises(ImproperlyConfigured, match="GARDEN_BEAT_RENEW_SECONDS"):
        LeasedScheduler(app=celery_app)
