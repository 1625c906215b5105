"""garden.scheduling, the one way every app sends a task by name: now, or after commit and,
inside a unit of work (a group step), only when it ends."""

from __future__ import annotations

import pytest
from celery.signals import task_prerun
from django.db import transaction

from config.celery import app
from garden import effects
from garden.scheduling import send, send_on_commit
from missions.scheduling import conclude_run_on_commit

SENT: list[tuple[str, object]] = []


@app.task(name="tests.garden.scheduled", ignore_result=True)
def scheduled(key: str) -> None:
    SENT.append(("scheduled", key))


@pytest.fixture
def eager():
    """The registered task runs where it is sent, so a send is seen at the moment it is made."""
    SENT.clear()
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        yield SENT
    finally:
        app.conf.task_always_eager = before


@pytest.mark.django_db(transaction=True)
def test_a_send_on_commit_waits_for_the_commit_and_for_the_unit_of_work(eager):
    send("tests.garden.scheduled", key="now")
    assert eager == [("scheduled", "now")]
    with transaction.atomic():
        send_on_commit("tests.garden.scheduled", key="after commit")
        assert len(eager) == 1
    assert eager[-1] == ("scheduled", "after commit")
    with effects.deferred(lambda channel, payload: None):
        with transaction.atomic():
            send_on_commit("tests.garden.scheduled", key="after the step")
        assert len(eager) == 2  # committed, but the unit of work has not ended
    assert eager[-1] == ("scheduled", "after the step")


@pytest.mark.django_db(transaction=True)
def test_a_missions_send_inside_a_step_waits_for_the_step(eager):
    import missions.tasks  # noqa: F401  (registers missions.conclude_run, run here eagerly)

    ran: list[str] = []

    def record(sender=None, **_: object) -> None:
        ran.append(sender.name)

    task_prerun.connect(record, weak=False)
    try:
        with effects.deferred(lambda channel, payload: None):
            conclude_run_on_commit(mission_run_id=0)
            assert ran == []
        assert ran == ["missions.conclude_run"]
    finally:
        task_prerun.disconnect(record)
