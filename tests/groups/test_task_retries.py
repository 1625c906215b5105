"""Task retries are declared on the task (garden.retry.RetryingTask): a real worker runs
them, and the group loop's two retrying tasks keep their policies."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError

from config.celery import app
from garden.retry import RetryingTask, RetryPolicy
from groups.group_lock import LockContended
from groups.tasks import WHEN_CONTENDED, WHEN_DISCONNECTED, advance_request, after_request
from tests.conftest import _wait_until_worker_idle, wait_for

CALLS: dict[str, int] = {}


@app.task(
    name="tests.groups.flaky",
    base=RetryingTask,
    retry_policies=(
        RetryPolicy(on=(LockContended,), backoff=0.01, backoff_max=0.05),
        RetryPolicy(on=(DatabaseError,), backoff=0.01, backoff_max=0.05, times=2),
    ),
    acks_late=True,
    ignore_result=True,
)
def flaky(key: str, failures: int, error: str) -> None:
    CALLS[key] = CALLS.get(key, 0) + 1
    if CALLS[key] <= failures:
        raise {"contended": LockContended, "database": DatabaseError, "other": KeyError}[error](key)


@pytest.mark.parametrize(
    ("error", "failures", "calls"),
    [
        ("contended", 4, 5),  # no limit: retried until it goes through
        ("database", 1, 2),
        ("database", 10, 3),  # two retries, then the error stands
        ("other", 1, 1),  # no policy matches: not retried
    ],
)
def test_a_worker_retries_as_the_task_declares(celery_worker_thread, error, failures, calls):
    key = f"{error}-{failures}"
    flaky.delay(key, failures, error)
    wait_for(lambda: CALLS.get(key, 0) >= calls)
    _wait_until_worker_idle()
    assert CALLS[key] == calls


def test_the_loops_tasks_keep_their_retry_policies():
    assert advance_request.retry_policies == (WHEN_CONTENDED, WHEN_DISCONNECTED)
    assert after_request.retry_policies == (WHEN_CONTENDED,)
    assert advance_request.max_retries is None and after_request.max_retries is None
    # A contended lock: retried without limit, soon (the holder finishes in about a call).
    assert WHEN_CONTENDED.times is None
    assert [WHEN_CONTENDED.delay(n) for n in range(8)] == [
        min(0.1 * 2 ** min(n, 6), 5.0) for n in range(8)
    ]
    # A dropped connection: twenty times, backing off to 15 s.
    assert WHEN_DISCONNECTED.times == 20
    assert [WHEN_DISCONNECTED.delay(n) for n in range(25)] == [
        min(0.5 * 2 ** min(n, 5), 15.0) for n in range(25)
    ]
    for error in (OperationalError("gone"), RedisConnectionError("gone")):
        assert isinstance(error, WHEN_DISCONNECTED.on)
    assert not isinstance(LockContended("g"), WHEN_DISCONNECTED.on)
