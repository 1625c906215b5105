"""The process's Redis client (locks, call slots), built on first use from REDIS_URL: its
connections at most GARDEN_REDIS_MAX_CONNECTIONS, however many threads a worker runs (a thread
that finds none free waits for one, up to its socket timeout)."""

from __future__ import annotations

from django.conf import settings

_client = None


def redis_client():
    global _client
    if _client is None:
        import redis

        pool = redis.BlockingConnectionPool.from_url(
            settings.REDIS_URL,
            max_connections=settings.GARDEN_REDIS_MAX_CONNECTIONS,
            timeout=5,
            socket_timeout=5,
            socket_connect_timeout=5,
        )
        _client = redis.Redis(connection_pool=pool)
    return _client
