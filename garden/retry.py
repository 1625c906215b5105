"""Retrying, declared once: a service's transaction run again when the database broke a lock
cycle by aborting it, and the retry policy of a Celery task (RetryPolicy, RetryingTask).

PostgreSQL ends one transaction of a deadlock (SQLSTATE 40P01) or of a serialisation conflict
(40001) and rolls it back whole: nothing of it was written and its ``on_commit`` hooks never
run, so running the same service again is safe. The person who posted gets the answer of
the retry, never a 500 for the database's choice of victim.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from celery import Task
from celery.exceptions import Reject, Retry
from django.db import OperationalError, connection

from garden import lost_sends
from garden.unavailable import SERVICE_AWAY

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

RETRIED_SQLSTATES = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure
ATTEMPTS = 4


def is_lock_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is the database aborting this transaction to break a lock cycle."""
    cause = exc.__cause__ if isinstance(exc, OperationalError) else None
    return getattr(cause, "sqlstate", None) in RETRIED_SQLSTATES


def retry_on_lock_conflict(func: Callable[P, R]) -> Callable[P, R]:
    """Wrap a service whose whole work is one transaction it opens itself. Called inside an
    outer transaction it is not retried: that transaction is aborted and is its caller's."""

    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(1, ATTEMPTS + 1):
            outermost = not connection.in_atomic_block
            try:
                return func(*args, **kwargs)
            except OperationalError as exc:
                if not (outermost and is_lock_conflict(exc)) or attempt == ATTEMPTS:
                    raise
                log.warning(
                    "%s: the database broke a lock cycle (%s); attempt %d of %d",
                    func.__qualname__,
                    exc.__cause__.sqlstate,
                    attempt + 1,
                    ATTEMPTS,
                )
                # Apart, so the two sides of the cycle do not meet again at once.
                time.sleep(random.uniform(0.01, 0.05) * attempt)
        raise AssertionError("unreachable")

    return run


@dataclass(frozen=True)
class RetryPolicy:
    """Deliver a task again when it raises one of ``on``: after ``backoff * 2**retries``
    seconds, never more than ``backoff_max``, at most ``times`` times (None: no limit) — or
    after what ``wait_of`` reads off the error, when the error says how long to wait (a
    service's Retry-After)."""

    on: tuple[type[BaseException], ...]
    backoff: float
    backoff_max: float
    times: int | None = None
    wait_of: Callable[[BaseException], float] | None = None

    def delay(self, retries: int, exc: BaseException | None = None) -> float:
        if self.wait_of is not None and exc is not None:
            return self.wait_of(exc)
        return min(self.backoff * 2 ** min(retries, 32), self.backoff_max)


class RetryingTask(Task):
    """A task base whose retries are declared on the task rather than written in its body:
    ``@shared_task(base=RetryingTask, retry_policies=(RetryPolicy(...), ...))``. The first
    policy whose errors match decides; an error none matches, or one past its policy's
    ``times``, is raised as it is."""

    retry_policies: tuple[RetryPolicy, ...] = ()
    max_retries = None  # the policies count their own

    def __call__(self, *args, **kwargs):
        try:
            return super().__call__(*args, **kwargs)
        except Exception as exc:
            retries = self.request.retries
            policy = next((p for p in self.retry_policies if isinstance(exc, p.on)), None)
            if policy is None or (policy.times is not None and retries >= policy.times):
                raise
            countdown = policy.delay(retries, exc)
            try:
                raise self.retry(countdown=countdown, exc=exc) from exc
            except Reject as rejected:
                if not isinstance(rejected.reason, SERVICE_AWAY):
                    raise
                # The broker is away too (Redis restarting): the retry is kept and sent when it
                # answers (garden/lost_sends.py), never dropped with this delivery.
                again = self.signature_from_request(
                    self.request, None, None, countdown=countdown, retries=retries + 1
                )
                lost_sends.keep(again.apply_async, self.name, rejected.reason)
                raise Retry(exc=exc, when=countdown, sig=again) from exc
