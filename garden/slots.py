"""Each owner's cap on model calls in flight across every worker (fair share).

A step takes one of its owner's slots before it reserves and dispatches a call, and gives it
back as soon as the call returns. When all of an owner's slots are taken, the step does not
block a worker thread: it says so on its request and comes back shortly, so other owners'
steps run in the meantime. Slots live in a Redis sorted set per owner (token → expiry), so a
worker that dies holding one loses it after the lock TTL; on the embedded default they are
per process.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from garden.redis_conn import redis_client

_ACQUIRE = """
redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[1])
if redis.call('zcard', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('zadd', KEYS[1], ARGV[3], ARGV[4])
    redis.call('pexpire', KEYS[1], ARGV[5])
    return 1
end
return 0
"""

_local: dict[int, dict[str, float]] = {}
_local_lock = threading.Lock()


def _key(owner_id: int) -> str:
    return f"{settings.GARDEN_CACHE_PREFIX}:calls-in-flight:{owner_id}"


def slot_acquire(*, owner_id: int) -> str | None:
    """A slot token for one model call of ``owner_id``, or None when all are in use."""
    limit = settings.GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER
    ttl = float(settings.GARDEN_LOCK_TTL_SECONDS)
    token = secrets.token_hex(8)
    now = time.time()
    if settings.REDIS_URL:
        taken = redis_client().eval(
            _ACQUIRE, 1, _key(owner_id), now, limit, now + ttl, token, int(ttl * 1000)
        )
        return token if taken else None
    with _local_lock:
        held = {t: exp for t, exp in _local.get(owner_id, {}).items() if exp > now}
        if len(held) >= limit:
            _local[owner_id] = held
            return None
        held[token] = now + ttl
        _local[owner_id] = held
    return token


def slot_release(*, owner_id: int, token: str) -> None:
    if settings.REDIS_URL:
        redis_client().zrem(_key(owner_id), token)
        return
    with _local_lock:
        _local.get(owner_id, {}).pop(token, None)


@contextmanager
def call_slot(*, owner_id: int) -> Iterator[bool]:
    """Hold one of the owner's slots for the block; yields False (holding none) when all are
    taken, and the caller must not make the call."""
    token = slot_acquire(owner_id=owner_id)
    try:
        yield token is not None
    finally:
        if token is not None:
            slot_release(owner_id=owner_id, token=token)
