"""The process's Redis connections: the client of the group locks and call slots, built on
first use, and the pool the cache's clients share, both from the site's one Redis configuration
(settings.GARDEN_REDIS, config/redis.py): a URL or Sentinels, TLS verified, every idle
connection checked before use and a command on a dropped one retried on a new one. Each pool
opens at most GARDEN_REDIS_MAX_CONNECTIONS, however many threads a worker runs (a thread that
finds none free waits for one, up to 5 s)."""

from __future__ import annotations

import threading
from typing import Any

import redis
from django.conf import settings
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool

_client = None


def redis_client() -> redis.Redis:
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


def connection_options() -> dict[str, Any]:
    """What garden adds to every sync connection's options: the health check and TLS of the
    site's configuration, and a retry of a command that met a dropped connection (after a
    restart or failover every pooled connection is stale; the first command would fail)."""
    return {
        **settings.GARDEN_REDIS.connection_options(),
        "retry": Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), retries=3),
        "retry_on_error": [RedisConnectionError, RedisTimeoutError],
    }


class _SentinelBlockingPool(SentinelConnectionPool, redis.BlockingConnectionPool):
    """The master's connections through the Sentinels, asked again on every new connection
    (so after a failover), with the blocking pool's bound: a thread waits for a free one."""


def build_pool(url: str, **kwargs: Any) -> redis.ConnectionPool:
    """A bounded, blocking pool of the site's Redis with ``kwargs`` (max_connections, timeout,
    socket timeouts) and garden's connection options. ``url`` is the site's REDIS_URL."""
    config = settings.GARDEN_REDIS
    options = {**connection_options(), **kwargs}
    if not config.sentinels:
        return redis.BlockingConnectionPool.from_url(url, **options)
    sentinel = Sentinel(list(config.sentinels), sentinel_kwargs=config.sentinel_options())
    return _SentinelBlockingPool(
        config.master,
        sentinel,
        db=config.db,
        username=config.username,
        password=config.password,
        ssl=config.tls,
        **options,
    )


class SharedConnectionPool(redis.BlockingConnectionPool):
    """A blocking pool, one per process for each address and set of options, whoever asks:
    Django makes a cache backend per thread, and each would otherwise open its own pool, so a
    worker of 500 threads held 500 connections to the cache. (A forked child's pool reconnects
    by itself: redis-py checks the pid.) Named as the cache's pool class, it builds the pool from
    the site's configuration (``build_pool``)."""

    _shared: dict[tuple, redis.ConnectionPool] = {}
    _lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> redis.ConnectionPool:
        key = (url, tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
        with cls._lock:
            pool = cls._shared.get(key)
            if pool is None:
                pool = cls._shared[key] = build_pool(url, **kwargs)
            return pool
