"""The per-group lock: Redis (SET NX PX + token, compare-and-delete release) in production,
an flock under var/ on the embedded default.

The lock only saves wasted work; correctness rests on the request row's fence, which every
write of a step checks, so a worker that lost its lock can never write.
"""

from __future__ import annotations

import fcntl
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from garden import metrics, telemetry
from garden.redis_conn import redis_client


class LockContended(Exception):
    """Another worker holds this group's lock; try again later."""


_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""


def lock_key(group_id: int) -> str:
    return f"garden:group-lock:{group_id}"


@contextmanager
def group_lock(group_id: int, *, ttl_seconds: int | None = None) -> Iterator[str]:
    """Hold the group's lock for the block; raise LockContended if someone else has it."""
    if settings.GARDEN_LOCK_BACKEND == "redis":
        with _redis_lock(group_id, ttl_seconds or settings.GARDEN_LOCK_TTL_SECONDS) as token:
            telemetry.event("garden.lock.acquired", {"garden.group.id": group_id})
            yield token
    else:
        with _file_lock(group_id) as token:
            telemetry.event("garden.lock.acquired", {"garden.group.id": group_id})
            yield token


@contextmanager
def _redis_lock(group_id: int, ttl_seconds: int) -> Iterator[str]:
    client = redis_client()
    key, token = lock_key(group_id), secrets.token_hex(16)
    if not client.set(key, token, nx=True, px=int(ttl_seconds * 1000)):
        metrics.lock_contended("redis")
        raise LockContended(key)
    try:
        yield token
    finally:
        # Compare-and-delete: never remove a lock that expired and was taken by another worker.
        client.eval(_RELEASE, 1, key, token)


@contextmanager
def _file_lock(group_id: int) -> Iterator[str]:
    directory = settings.VAR_DIR / "locks"
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / f"group-{group_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            metrics.lock_contended("file")
            raise LockContended(f"group {group_id}") from exc
        yield f"flock:{fd}"
    finally:
        os.close(fd)
