"""The process's Redis connections: the client of the group locks and call slots, built on
first use from REDIS_URL, and the pool the cache's clients share. Each pool opens at most
GARDEN_REDIS_MAX_CONNECTIONS, however many threads a worker runs (a thread that finds none free
waits for one, up to 5 s)."""

from __future__ import annotations

import threading
from typing import Any

import redis
from django.conf import settings

_client = None


def redis_client():
    global _client
    if _client is None:
        pool = SharedConnectionPool.from_url(
            settings.REDIS_URL,
            max_connections=settings.GARDEN_REDIS_MAX_CONNECTIONS,
            timeout=5,
            socket_timeout=5,
            socket_connect_timeout=5,
        )
        _client = redis.Redis(connection_pool=pool)
    return _client


class SharedConnectionPool(redis.BlockingConnectionPool):
    """A blocking pool, one per process for each address and set of options, whoever asks:
    Django makes a cache backend per thread, and each would otherwise open its own pool, so a
    worker of 500 threads held 500 connections to the cache. (A forked child's pool reconnects
    by itself: redis-py checks the pid.)"""

    _shared: dict[tuple, SharedConnectionPool] = {}
    _lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> SharedConnectionPool:
        key = (url, tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
        with cls._lock:
            pool = cls._shared.get(key)
            if pool is None:
                pool = cls._shared[key] = super().from_url(url, **kwargs)
            return pool
