"""The deadline of the request in progress: one total for every lookup, connect, read and
write an egress client makes inside it, and the owner it is made for (whose fair share its
name lookups count against)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from garden.db_release import release_before_network

_deadline: ContextVar[float | None] = ContextVar("egress_deadline", default=None)
_owner: ContextVar[int | None] = ContextVar("egress_owner", default=None)


@contextmanager
def deadline(seconds: float, *, owner_id: int | None = None) -> Iterator[None]:
    """Bound every lookup, connect, read and write of the requests made in this block by a
    total of ``seconds`` (httpx's own timeouts apply per phase, so a slow server could stretch
    them); inside an outer deadline, the earlier end wins. With ``owner_id`` the block's
    requests are made for that owner (without it, for the outer block's owner, if any).

    In a web request the thread's database connections are handed back first
    (``garden.db_release``): a client that goes away must not strand one outside the pool."""
    release_before_network()
    end = time.monotonic() + seconds
    outer = _deadline.get()
    token = _deadline.set(end if outer is None else min(outer, end))
    owner_token = _owner.set(owner_id) if owner_id is not None else None
    try:
        yield
    finally:
        if owner_token is not None:
            _owner.reset(owner_token)
        _deadline.reset(token)


def current_owner() -> int | None:
    """The owner the requests in progress are made for, or None (the operator's own, such as
    the Bot API's)."""
    return _owner.get()


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
