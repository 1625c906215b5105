"""Per-process and per-site state a test must not inherit from the one before it."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache


def clear_cache() -> None:
    """Empty the cache (rate windows, listings) and, with Redis, every key under the site's
    prefix (the cache's, the API's rate windows, call slots), leaving the broker's keys in the
    same Redis database alone (RedisCache.clear() would flush them)."""
    if not settings.REDIS_URL:
        cache.clear()
        return
    from garden.redis_conn import redis_client

    client = redis_client()
    keys = list(client.scan_iter(match=f"{settings.GARDEN_CACHE_PREFIX}:*", count=1000))
    for start in range(0, len(keys), 500):
        client.delete(*keys[start : start + 500])
