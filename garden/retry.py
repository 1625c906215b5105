"""Run a service's transaction again when the database broke a lock cycle by aborting it.

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
from typing import ParamSpec, TypeVar

from django.db import OperationalError, connection

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
