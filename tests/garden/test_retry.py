"""A service whose transaction the database aborts to break a deadlock runs again, whole."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection, transaction

from garden.retry import retry_on_lock_conflict

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _crosswise(first: int, second: int, barrier: threading.Barrier, attempts: list) -> None:
    """Lock ``first``, meet the other thread, then lock ``second``: two such transactions in
    opposite orders are a deadlock the database breaks by aborting one of them."""
    User = get_user_model()

    @retry_on_lock_conflict
    def service() -> str:
        attempts.append(first)
        with transaction.atomic():
            User.objects.select_for_update().get(pk=first)
            if attempts.count(first) == 1:
                barrier.wait(timeout=10)
            User.objects.select_for_update().get(pk=second)
            return "done"

    try:
        assert service() == "done"
    finally:
        connection.close()


def test_the_deadlocks_victim_is_run_again_and_both_complete(django_user_model):
    a = django_user_model.objects.create_user(username="a").pk
    b = django_user_model.objects.create_user(username="b").pk
    barrier, attempts, failures = threading.Barrier(2), [], []

    def run(first: int, second: int) -> None:
        try:
            _crosswise(first, second, barrier, attempts)
        except BaseException as exc:  # reported below, not lost in the thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=pair) for pair in ((a, b), (b, a))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failures == []
    # One of the two was the database's victim and ran a second time.
    assert sorted(attempts.count(pk) for pk in (a, b)) == [1, 2]


def test_inside_a_callers_transaction_the_conflict_is_the_callers(django_user_model):
    calls = []

    @retry_on_lock_conflict
    def service() -> None:
        calls.append(1)
        with connection.cursor() as cursor:
            cursor.execute(
                "DO $$ BEGIN RAISE EXCEPTION 'cycle' USING ERRCODE = 'deadlock_detected'; END $$"
            )

    with pytest.raises(OperationalError), transaction.atomic():
        service()
    assert calls == [1]
    # Outside any transaction the same refusal is retried to the limit, then raised.
    calls.clear()
    with pytest.raises(OperationalError):
        service()
    assert len(calls) == 4
