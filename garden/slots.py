"""Each owner's caps on work in flight across every worker (fair share): model calls, tool
runs, and webhook tries.

A step takes one of its owner's call slots before it claims, projects, reserves and dispatches
a call, and gives it back as soon as the call returns; it takes one of the owner's tool slots
before it runs a reply's tools, and gives it back when they return; a webhook try holds one
of the owner's webhook slots while it sends. When all of an owner's slots of a kind are taken,
the step (or try) does not block a worker thread: it comes back later (``slot_backoff``), so
other owners' work runs in the meantime. Slots live in a Redis sorted
set per owner and kind (token → expiry), so a worker that dies holding one loses it after the
lock TTL; on the embedded default they are per process.
"""

from __future__ import annotations

import random
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from garden import metrics
from garden.redis_conn import redis_client

CALLS = "calls-in-flight"
TOOLS = "tools-in-flight"
WEBHOOKS = "webhooks-in-flight"

_ACQUIRE = """
redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[1])
if redis.call('zcard', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('zadd', KEYS[1], ARGV[3], ARGV[4])
    redis.call('pexpire', KEYS[1], ARGV[5])
    return 1
end
return 0
"""

# The same, after giving a lock held under a token (KEYS[2], ARGV[6]) a whole TTL again
# (ARGV[7] ms); -1 when that lock is no longer the holder's (nothing taken or extended).
_EXTEND_THEN_ACQUIRE = (
    """
if redis.call('get', KEYS[2]) ~= ARGV[6] then
    return -1
end
redis.call('pexpire', KEYS[2], ARGV[7])
"""
    + _ACQUIRE
)


class LockLost(Exception):
    """The lock a slot was to be taken under is no longer its holder's."""


_local: dict[tuple[str, int], dict[str, float]] = {}
_local_lock = threading.Lock()


def _key(kind: str, owner_id: int) -> str:
    return f"{settings.GARDEN_CACHE_PREFIX}:{kind}:{owner_id}"


def _limit(kind: str) -> int:
    if kind == TOOLS:
        return settings.GARDEN_MAX_TOOLS_IN_FLIGHT_PER_OWNER
    if kind == WEBHOOKS:
        return settings.GARDEN_MAX_WEBHOOKS_IN_FLIGHT_PER_OWNER
    return settings.GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER


def slot_acquire(
    *, owner_id: int, kind: str = CALLS, extending: tuple[str, str] | None = None
) -> str | None:
    """A slot token for one model call (or, with ``kind=TOOLS``, one reply's tool run; with
    ``kind=WEBHOOKS``, one webhook try) of ``owner_id``, or None when all are in use.

    ``extending`` (a Redis key and the token it holds) is a lock of the caller's, given a
    whole TTL again in the same round trip before the slot is looked for; LockLost (nothing
    taken) when it no longer holds that token."""
    limit = _limit(kind)
    ttl = float(settings.GARDEN_LOCK_TTL_SECONDS)
    token = secrets.token_hex(8)
    now = time.time()
    if settings.REDIS_URL:
        args = [now, limit, now + ttl, token, int(ttl * 1000)]
        if extending is None:
            taken = redis_client().eval(_ACQUIRE, 1, _key(kind, owner_id), *args)
        else:
            lock, held = extending
            taken = redis_client().eval(
                _EXTEND_THEN_ACQUIRE, 2, _key(kind, owner_id), lock, *args, held, int(ttl * 1000)
            )
            if taken == -1:
                raise LockLost(lock)
        return token if taken else None
    with _local_lock:
        held = {t: exp for t, exp in _local.get((kind, owner_id), {}).items() if exp > now}
        if len(held) >= limit:
            _local[(kind, owner_id)] = held
            return None
        held[token] = now + ttl
        _local[(kind, owner_id)] = held
    return token


def slot_release(*, owner_id: int, token: str, kind: str = CALLS) -> None:
    if settings.REDIS_URL:
        redis_client().zrem(_key(kind, owner_id), token)
        return
    with _local_lock:
        _local.get((kind, owner_id), {}).pop(token, None)


class HeldSlot:
    """A slot taken ahead of the block that uses it, given back once (on ``release`` or on
    leaving a ``with`` block, whichever comes first)."""

    def __init__(self, *, owner_id: int, token: str, kind: str = CALLS) -> None:
        self.owner_id, self.token, self.kind = owner_id, token, kind
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            metrics.slot_given_back(_label(self.kind))
            slot_release(owner_id=self.owner_id, token=self.token, kind=self.kind)

    def __enter__(self) -> HeldSlot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def slot_hold(
    *, owner_id: int, kind: str = CALLS, extending: tuple[str, str] | None = None
) -> HeldSlot | None:
    """One of the owner's slots of ``kind``, held until released; None when all are taken.
    ``extending``: as for ``slot_acquire`` (may raise LockLost)."""
    token = slot_acquire(owner_id=owner_id, kind=kind, extending=extending)
    if token is None:
        return None
    metrics.slot_taken(_label(kind))
    return HeldSlot(owner_id=owner_id, token=token, kind=kind)


def _label(kind: str) -> str:
    return {TOOLS: "tools", WEBHOOKS: "webhooks"}.get(kind, "calls")


def slot_backoff(waits: int) -> float:
    """Seconds before a step that found no free slot looks again, after ``waits`` earlier
    looks: growing from GARDEN_CALL_SLOT_RETRY_SECONDS to GARDEN_SLOT_RETRY_MAX_SECONDS, each
    jittered (so the waiting steps of one owner do not come back together)."""
    base = settings.GARDEN_CALL_SLOT_RETRY_SECONDS
    ceiling = max(base, settings.GARDEN_SLOT_RETRY_MAX_SECONDS)
    return min(ceiling, base * 2 ** min(waits, 16)) * random.uniform(0.5, 1.0)


@contextmanager
def call_slot(*, owner_id: int) -> Iterator[bool]:
    """Hold one of the owner's slots for the block; yields False (holding none) when all are
    taken, and the caller must not make the call."""
    token = slot_acquire(owner_id=owner_id)
    if token is not None:
        metrics.slot_taken("calls")
    try:
        yield token is not None
    finally:
        if token is not None:
            metrics.slot_given_back("calls")
            slot_release(owner_id=owner_id, token=token)
