"""The per-group lock: Redis (SET NX PX + token, compare-and-delete release) in production,
an flock under var/ on the embedded default.

The lock only saves wasted work; correctness rests on the request row's fence, which every
write of a step checks, so a worker that lost its lock can never write. That is why a
failed release is logged and never raised over a finished step.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from django.conf import settings

from garden import metrics
from garden.redis_conn import redis_client
from garden.slots import HeldSlot, LockLost, slot_hold

log = logging.getLogger(__name__)


class LockContended(Exception):
    """Another worker holds this group's lock; try again later."""


_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""


_EXTEND = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""


def lock_key(group_id: int) -> str:
    return f"garden:group-lock:{group_id}"


class LockBackend(Protocol):
    name: str

    def acquire(self, group_id: int, ttl_seconds: float) -> str:
        """Take the group's lock and return its token; raise LockContended if held."""

    def extend(self, group_id: int, token: str, ttl_seconds: float) -> bool:
        """Give the held lock a whole TTL again from now; False when it is no longer ours."""

    def release(self, group_id: int, token: str) -> None:
        """Give the lock back; may raise (the caller logs and suppresses)."""


class RedisLockBackend:
    name = "redis"

    def __init__(self, client) -> None:
        self.client = client

    def acquire(self, group_id: int, ttl_seconds: float) -> str:
        key, token = lock_key(group_id), secrets.token_hex(16)
        if not self.client.set(key, token, nx=True, px=int(ttl_seconds * 1000)):
            metrics.lock_contended(self.name)
            raise LockContended(key)
        return token

    def extend(self, group_id: int, token: str, ttl_seconds: float) -> bool:
        # Compare-and-expire: never lengthen a lock another worker took after ours expired.
        return bool(
            self.client.eval(_EXTEND, 1, lock_key(group_id), token, int(ttl_seconds * 1000))
        )

    def release(self, group_id: int, token: str) -> None:
        # Compare-and-delete: never remove a lock that expired and was taken by another worker.
        if not self.client.eval(_RELEASE, 1, lock_key(group_id), token):
            log.warning("group %s: the lock had expired or passed on before release", group_id)


class FileLockBackend:
    name = "file"

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def acquire(self, group_id: int, ttl_seconds: float) -> str:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.directory / f"group-{group_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            metrics.lock_contended(self.name)
            raise LockContended(f"group {group_id}") from exc
        return f"flock:{fd}"

    def extend(self, group_id: int, token: str, ttl_seconds: float) -> bool:
        # An flock lasts while its descriptor is open: held until released, it never lapses.
        return True

    def release(self, group_id: int, token: str) -> None:
        # Closing the descriptor drops the flock.
        os.close(int(token.removeprefix("flock:")))


@functools.cache
def lock_backend() -> LockBackend:
    """The process's lock backend, chosen once at first use from GARDEN_LOCK_BACKEND."""
    if settings.GARDEN_LOCK_BACKEND == "redis":
        return RedisLockBackend(redis_client())
    return FileLockBackend(settings.VAR_DIR / "locks")


def group_lock_keep_with_slot(group_id: int, token: str, *, owner_id: int) -> HeldSlot | None:
    """For a delivery that goes on to its request's next step: the group's lock, held under
    ``token``, given a whole TTL again, and one of ``owner_id``'s call slots taken — one Redis
    round trip for both. None: the lock is kept but every slot is in use. Raises LockLost
    (nothing taken) when the lock lapsed or passed to another worker."""
    backend = lock_backend()
    if isinstance(backend, RedisLockBackend):
        return slot_hold(owner_id=owner_id, extending=(lock_key(group_id), token))
    if not backend.extend(group_id, token, settings.GARDEN_LOCK_TTL_SECONDS):
        raise LockLost(f"group {group_id}")
    return slot_hold(owner_id=owner_id)


@contextmanager
def group_lock(group_id: int, *, ttl_seconds: int | None = None) -> Iterator[str]:
    """Hold the group's lock for the block; raise LockContended if someone else has it."""
    backend = lock_backend()
    token = backend.acquire(group_id, ttl_seconds or settings.GARDEN_LOCK_TTL_SECONDS)
    try:
        yield token
    finally:
        try:
            backend.release(group_id, token)
        except Exception:
            # Whatever the release hits (a dropped Redis connection, a closed descriptor),
            # the step's work is done and fenced; the lock lapses by its TTL.
            log.warning(
                "group %s: releasing the %s lock failed", group_id, backend.name, exc_info=True
            )
