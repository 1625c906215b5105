"""A worker's threads share a bounded number of Redis connections: however many of them wait
on Redis at once, the process opens at most GARDEN_REDIS_MAX_CONNECTIONS for its locks and
slots, and as many for the cache."""

from __future__ import annotations

import threading

import pytest
from django.core.cache import caches

from garden import redis_conn

pytestmark = pytest.mark.redis

THREADS = 24


@pytest.fixture
def bounded(settings, monkeypatch):
    settings.GARDEN_REDIS_MAX_CONNECTIONS = 3
    monkeypatch.setattr(redis_conn, "_client", None)
    yield 3
    redis_conn._client = None


def _all_at_once(work) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def run(i: int) -> None:
        start.wait()
        try:
            work(i)
        except BaseException as exc:  # collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return errors


def test_the_locks_and_slots_client_opens_at_most_its_connections(bounded):
    client = redis_conn.redis_client()
    # Each thread holds a connection for a tenth of a second (a blocking pop that times out).
    errors = _all_at_once(lambda i: client.blpop([f"garden:test:bounded:{i}"], timeout=0.1))
    assert errors == []
    pool = client.connection_pool
    assert pool.max_connections == bounded
    assert len(pool._connections) <= bounded


def test_every_threads_cache_shares_one_bounded_pool(settings):
    """Django gives each thread its own cache backend; they share the process's pool."""
    pools = set()

    def use_the_cache(i: int) -> None:
        cache = caches["default"]
        cache.set(f"bounded-{i}", i, 5)
        pools.add(id(cache._cache._get_connection_pool(write=True)))

    errors = _all_at_once(use_the_cache)
    assert errors == []
    (pool_id,) = pools
    pool = caches["default"]._cache._get_connection_pool(write=True)
    assert id(pool) == pool_id
    assert pool.max_connections == settings.GARDEN_REDIS_MAX_CONNECTIONS
    assert len(pool._connections) <= settings.GARDEN_REDIS_MAX_CONNECTIONS
