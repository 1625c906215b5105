"""The process's Redis client (locks, call slots), built on first use from REDIS_URL."""

from __future__ import annotations

from django.conf import settings

_client = None


def redis_client():
    global _client
    if _client is None:
        import redis

        _client = redis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=5
        )
    return _client
