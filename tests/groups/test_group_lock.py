"""The group lock: one backend per process, and a release that fails is logged, not raised."""

from __future__ import annotations

import logging
import os
import socket

import pytest
import redis

from groups import group_lock as group_lock_module
from groups.group_lock import (
    FileLockBackend,
    LockContended,
    group_lock,
    lock_backend,
    lock_key,
)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_backend_is_chosen_once(settings):
    chosen = lock_backend()
    settings.GARDEN_LOCK_BACKEND = "local" if chosen.name == "redis" else "redis"
    assert lock_backend() is chosen
    with group_lock(90_001):
        with pytest.raises(LockContended), group_lock(90_001):
            pass


@pytest.mark.redis
def test_a_release_over_a_dropped_redis_connection_is_logged_not_raised(caplog):
    backend = lock_backend()
    assert backend.name == "redis"
    reachable = backend.client
    try:
        with caplog.at_level(logging.WARNING, logger="groups.group_lock"), group_lock(90_002):
            backend.client = redis.Redis(port=_closed_port(), socket_connect_timeout=1)
    finally:
        backend.client = reachable
        reachable.delete(lock_key(90_002))
    assert "releasing the redis lock failed" in caplog.text


@pytest.mark.redis
def test_a_release_that_finds_the_lock_gone_is_logged_and_the_bodys_error_wins(caplog):
    backend = lock_backend()
    assert backend.name == "redis"
    with (
        caplog.at_level(logging.WARNING, logger="groups.group_lock"),
        pytest.raises(KeyError),
        group_lock(90_003),
    ):
        backend.client.delete(lock_key(90_003))
        raise KeyError("the step's own failure")
    assert "expired or passed on before release" in caplog.text
    with group_lock(90_003):  # nothing was left behind
        pass


def test_a_file_lock_release_that_fails_is_logged_not_raised(caplog, monkeypatch, tmp_path):
    """The embedded default's lock (an flock under var/), whichever backend this process
    chose."""
    files = FileLockBackend(tmp_path)
    monkeypatch.setattr(group_lock_module, "lock_backend", lambda: files)
    with caplog.at_level(logging.WARNING, logger="groups.group_lock"), group_lock(90_004) as token:
        os.close(int(token.removeprefix("flock:")))
    assert "releasing the file lock failed" in caplog.text
