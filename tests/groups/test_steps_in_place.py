"""A delivery that holds a group's room runs the request's next steps in place (no broker hop,
the lock kept and extended), within its bounds, and hands the next step to the broker when it
must: its step count, its time window, a worker shutting down, or a lock no longer its own."""

from __future__ import annotations

import pytest
from celery.signals import task_prerun

from garden import heartbeat
from garden.redis_conn import redis_client
from garden.slots import LockLost, slot_hold
from groups.group_lock import (
    FileLockBackend,
    RedisLockBackend,
    group_lock_keep_with_slot,
    lock_key,
)
from groups.loop.step import advance_request
from groups.models import CallReservation, GroupRequest
from groups.scheduling import ADVANCE_REQUEST
from groups.services.requests import request_create, request_start_next
from tests.conftest import wait_for
from tests.support.driving import finished, statements_per_step
from tests.support.workers import queued_tasks

ASK = {"name": "group.ask", "arguments": {"member": "ledger", "request": "One more figure."}}


def asking_group(group_factory):
    """Concierge asks Ledger on every working call: 11 working calls and the synthesis, each
    its own step (13 with the step that moves to synthesis)."""
    return group_factory(
        members={"ledger": [{"reply": "A figure."}]},
        concierge_rules=[
            {"when": "consolidated answer", "reply": "Final."},
            {"reply": {"text": "More.", "tool_calls": [ASK]}},
        ],
    )


def started(group) -> GroupRequest:
    request = request_create(group=group, text="Count everything.")
    request_start_next(group_id=group.pk)
    request.refresh_from_db()
    assert request.state == "running"
    return request


def started_alone(group_factory) -> GroupRequest:
    """A running request whose first step this test delivers itself: the broker emptied of
    its message."""
    from config.celery import app

    app.control.purge()
    request = started(asking_group(group_factory))
    app.control.purge()
    return request


def calls_of(request) -> list[str]:
    """The request's calls: its reservations, but those given back undispatched."""
    return list(
        CallReservation.objects.filter(request=request)
        .exclude(status="released")
        .order_by("id")
        .values_list("purpose", flat=True)
    )


@pytest.fixture
def deliveries():
    """The step deliveries the in-process worker starts (its task_prerun)."""
    seen: list[dict] = []

    def count(sender=None, kwargs=None, **_):
        if sender is not None and sender.name == ADVANCE_REQUEST:
            seen.append(dict(kwargs or {}))

    task_prerun.connect(count, weak=False)
    yield seen
    task_prerun.disconnect(count)


def test_a_worker_runs_a_whole_request_in_one_delivery(
    celery_worker_thread, group_factory, deliveries
):
    request = request_create(group=asking_group(group_factory), text="Count everything.")
    wait_for(finished(request), timeout=60)
    assert request.state == "completed", (request.outcome_code, request.outcome)
    assert calls_of(request) == ["working"] * 11 + ["synthesis"]
    # Every step before went through the broker (13 deliveries); now the first delivery
    # carries the request to its end.
    assert len(deliveries) == 1, deliveries


def test_a_delivery_runs_at_most_its_steps_and_sends_the_next(
    celery_worker_thread, group_factory, deliveries, settings
):
    settings.GARDEN_STEPS_PER_DELIVERY = 5
    request = request_create(group=asking_group(group_factory), text="Count everything.")
    wait_for(finished(request), timeout=60)
    assert request.state == "completed"
    assert calls_of(request) == ["working"] * 11 + ["synthesis"]
    # 13 steps, five a delivery: each delivery after the first starts where the last stopped.
    assert len(deliveries) == 3, deliveries
    fences = [d["fence"] for d in deliveries]
    assert fences == sorted(fences) and fences[1] - fences[0] == fences[2] - fences[1] == 5


@pytest.mark.django_db(transaction=True)
def test_a_delivery_goes_on_in_place_until_the_request_ends(group_factory):
    request = started(asking_group(group_factory))
    outcome = advance_request(
        request_id=request.pk, fence=request.fence, group_id=request.group_id, steps=50
    )
    request.refresh_from_db()
    assert (outcome, request.state) == ("completed", "completed")
    assert calls_of(request) == ["working"] * 11 + ["synthesis"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "why", ["window", "shutdown", pytest.param("lock", marks=pytest.mark.redis)]
)
def test_a_delivery_that_may_not_go_on_sends_the_next_step(
    group_factory, settings, why, monkeypatch
):
    """Its window spent, its worker shutting down, or its lock lost: one step runs, and the
    next is the broker's, at the fence the step completed — nothing is lost."""
    if why == "window":
        settings.GARDEN_STEP_CONTINUE_SECONDS = 0
    elif why == "shutdown":
        monkeypatch.setattr(heartbeat, "_shutting_down", type(heartbeat._shutting_down)())
        heartbeat.on_worker_shutting_down()
    else:
        # The lock lapsed and another worker took it before the next step: keeping it fails.
        def taken_over(group_id, token, *, owner_id):
            redis_client().set(lock_key(group_id), "another-worker", px=5_000)
            return group_lock_keep_with_slot(group_id, token, owner_id=owner_id)

        monkeypatch.setattr("groups.loop.step.group_lock_keep_with_slot", taken_over)
    from config.celery import app

    request = started_alone(group_factory)
    advance_request(request_id=request.pk, fence=request.fence, group_id=request.group_id, steps=50)
    request.refresh_from_db()
    assert request.state == "running" and calls_of(request) == ["working"]
    # Its write may have claimed the next fence already (it expected to go on); the step the
    # broker delivers then takes that claim over, as a lost step's.
    assert request.fence - request.completed_fence in (0, 1)
    assert queued_tasks() == 1
    app.control.purge()
    # A call its write reserved ahead for the next step (when it expected to go on) is given
    # back, never dispatched: the broker's step reserves its own.
    given_back = CallReservation.objects.filter(request=request, status="released")
    assert set(given_back.values_list("reason", flat=True)) <= {"not dispatched"}
    assert given_back.count() == request.fence - request.completed_fence
    if why == "lock":
        # The other worker's lock is left as it was, not released by this delivery.
        assert redis_client().get(lock_key(request.group_id)) in (
            b"another-worker",
            "another-worker",
        )
        redis_client().delete(lock_key(request.group_id))  # it lapses; the broker's step runs
    assert advance_request(
        request_id=request.pk, fence=request.completed_fence, group_id=request.group_id
    ) not in ("stale", "missing")
    assert calls_of(request) == ["working", "working"]


@pytest.mark.redis
@pytest.mark.django_db
def test_keeping_the_lock_and_taking_a_slot_is_one_script(owner, settings):
    """The lock kept only under its own token, a whole TTL again, with a call slot taken; a
    lock that passed on takes nothing."""
    settings.GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER = 1
    key = lock_key(90_013)
    backend = RedisLockBackend(redis_client())
    token = backend.acquire(90_013, 0.05)
    slot = group_lock_keep_with_slot(90_013, token, owner_id=owner.pk)
    assert slot is not None and redis_client().pttl(key) > 1_000
    # Every slot in use: the lock is kept all the same, and no slot comes.
    assert group_lock_keep_with_slot(90_013, token, owner_id=owner.pk) is None
    slot.release()
    redis_client().set(key, "another-worker")
    with pytest.raises(LockLost):
        group_lock_keep_with_slot(90_013, token, owner_id=owner.pk)
    assert slot_hold(owner_id=owner.pk) is not None  # the refused call took no slot
    redis_client().delete(key)


@pytest.mark.redis
def test_extending_a_redis_lock_needs_its_token():
    backend, key = RedisLockBackend(redis_client()), lock_key(90_011)
    token = backend.acquire(90_011, 0.05)
    assert backend.extend(90_011, token, 30)
    assert redis_client().pttl(key) > 20_000
    assert not backend.extend(90_011, "someone-else", 30)
    redis_client().set(key, "another-worker")
    assert not backend.extend(90_011, token, 30)
    redis_client().delete(key)


def test_an_flock_held_is_always_still_ours(tmp_path):
    files = FileLockBackend(tmp_path)
    token = files.acquire(90_012, 1)
    assert files.extend(90_012, token, 1)
    files.release(90_012, token)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_step_in_place_is_one_statement(group_factory):
    """Each step after the first of a delivery was claimed, and its call reserved, by the
    write of the step before it; a member's answer and the coordinator's asks are then one
    statement each (its record); the first step claims, reads the room and reserves too."""
    request = started(asking_group(group_factory))
    counts = statements_per_step(request)
    request.refresh_from_db()
    assert request.state == "completed" and len(counts) == 13
    assert counts[0] >= 3
    # The steady steps: one statement; moving to synthesis and the conclusion write more.
    assert counts.count(1) >= 10, counts


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_lock_that_cannot_be_kept_gives_the_call_back_and_sends_the_step(
    group_factory, monkeypatch
):
    """Redis failing between two steps: the delivery fails (its task retries), the call its
    last write reserved ahead is given back, and the next step is on the broker."""
    from redis.exceptions import ConnectionError as RedisDown

    from config.celery import app

    def down(group_id, token, *, owner_id):
        raise RedisDown("no connection available")

    monkeypatch.setattr("groups.loop.step.group_lock_keep_with_slot", down)
    request = started_alone(group_factory)
    with pytest.raises(RedisDown):
        advance_request(
            request_id=request.pk, fence=request.fence, group_id=request.group_id, steps=50
        )
    request.refresh_from_db()
    assert calls_of(request) == ["working"] and queued_tasks() == 1
    (given_back,) = CallReservation.objects.filter(request=request, status="released")
    assert given_back.reason == "not dispatched"
    # Nobody is said to be working on a call that never went out.
    assert request.working_agent_id is None
    app.control.purge()


@pytest.mark.django_db(transaction=True)
def test_a_step_in_place_that_fails_is_sent_again_at_its_own_fence(group_factory, monkeypatch):
    """The task's retry would deliver its first fence, long passed: the step that failed in
    place goes back to the broker itself, and the request goes on from there."""
    from django.db import OperationalError

    from config.celery import app
    from groups.loop import step

    real = step.claimed_room
    failures = [OperationalError("the connection dropped")]

    def once(claim):
        if failures:
            raise failures.pop()
        return real(claim)

    monkeypatch.setattr(step, "claimed_room", once)
    request = started_alone(group_factory)
    with pytest.raises(OperationalError):
        advance_request(
            request_id=request.pk, fence=request.fence, group_id=request.group_id, steps=50
        )
    request.refresh_from_db()
    assert queued_tasks() == 1
    app.control.purge()
    # That step, delivered (at the fence its predecessor completed), goes on.
    assert (
        advance_request(
            request_id=request.pk,
            fence=request.completed_fence,
            group_id=request.group_id,
            steps=50,
        )
        == "completed"
    )
    request.refresh_from_db()
    assert request.state == "completed"
    assert calls_of(request).count("synthesis") == 1
