"""The deadline of the request in progress: one total for every lookup, connect, read and
write an egress client makes inside it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_deadline: ContextVar[float | None] = ContextVar("egress_deadline", default=None)


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Bound every lookup, connect, read and write of the requests made in this block by a
    total of ``seconds`` (httpx's own timeouts apply per phase, so a slow server could stretch
    them); inside an outer deadline, the earlier end wins."""
    end = time.monotonic() + seconds
    outer = _deadline.get()
    token = _deadline.set(end if outer is None else min(outer, end))
    try:
        yield
    finally:
        _deadline.reset(token)


def clamp(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to what is left of the current deadline; raises ``error`` once it has
    passed."""
    end = _deadline.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise error("the request's total time limit passed")
    return left if timeout is None else min(timeout, left)
