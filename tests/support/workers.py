"""A real Celery worker in the test process, for the tests whose subject is delivery itself
(acks, retries, crashes, the next step enqueued on commit); routing and budget logic is driven
inline instead (tests/support/driving.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


@contextmanager
def _prompt_shutdown() -> Iterator[None]:
    """Celery's blocking loop (the filesystem transport of the embedded default) drains the
    broker for up to 2 s per turn and runs one more turn after it is told to stop, so each
    worker took ~3.5 s to stop. Drained in turns of at most 0.1 s, it stops at once; the
    transport polls every 0.05 s anyway, so what and when the worker consumes is unchanged.
    On Redis, closing the worker's channel waits for its outstanding BRPOP, which blocks for
    up to a second when the queue is empty: there it blocks for at most 0.1 s (a message still
    ends it at once)."""
    from kombu.transport import redis, virtual

    drain = virtual.Transport.drain_events
    brpop_timeout = redis.Transport.brpop_timeout

    def drain_briefly(self, connection, timeout=None, **kwargs):
        return drain(self, connection, timeout=min(timeout, 0.1) if timeout else timeout, **kwargs)

    virtual.Transport.drain_events = drain_briefly
    redis.Transport.brpop_timeout = 0.1
    try:
        yield
    finally:
        virtual.Transport.drain_events = drain
        redis.Transport.brpop_timeout = brpop_timeout


@contextmanager
def threads_worker(concurrency: int = 2, *, purge: bool = True) -> Iterator[Any]:
    """A real Celery worker in this process with ``concurrency`` threads (a test's tool or
    counter living in this process is the one the worker runs), on the configured broker:
    Redis when REDIS_URL is set, else the filesystem transport. The queue is emptied first
    unless ``purge`` is false (a test that enqueued before the worker came). Needs
    ``transactional_db``."""
    from celery.contrib.testing.worker import start_worker

    from config.celery import app
    from garden import heartbeat

    if purge:
        app.control.purge()
    with (
        _prompt_shutdown(),
        start_worker(
            app,
            pool="threads",
            concurrency=concurrency,
            perform_ping_check=False,
            loglevel=os.environ.get("GARDEN_TEST_WORKER_LOGLEVEL", "WARNING"),
            shutdown_timeout=15,
        ) as worker,
    ):
        # celery's test worker sends no worker_ready: it beats as every other worker does.
        heartbeat.start(hostname=worker.hostname, concurrency=concurrency)
        try:
            yield app
            wait_until_worker_idle()
        finally:
            heartbeat.stop(hostname=worker.hostname)


def wait_until_worker_idle(timeout: float = 30.0) -> None:
    """Let the work a test set going finish before the worker stops and the test database is
    flushed under it: the broker's queue empty and no task running, reserved or scheduled (a
    retry's countdown) on three looks in a row, so a task that the last one enqueued (a
    request's after_request, the next step) is fetched and run too. Gives up quietly after
    ``timeout`` (the worker then stops with the work where it is)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _quiet_for(polls=3):
            return


def _quiet_for(*, polls: int) -> bool:
    """Whether the queue stays empty and this process's worker idle for ``polls`` looks."""
    from celery.worker import state

    for _ in range(polls):
        busy = state.active_requests or state.reserved_requests or state.scheduled_requests
        if busy or queued_tasks():
            time.sleep(0.05)  # polls FOR quiescence, with a deadline
            return False
        time.sleep(0.05)  # polls FOR quiescence, with a deadline
    return True


def wait_for(predicate, *, timeout: float = 20.0, interval: float = 0.05):
    """Poll ``predicate`` until it returns a truthy value; fail the test with a clear message."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)  # polls FOR a positive outcome, with a deadline
    pytest.fail(f"condition not met within {timeout}s: {getattr(predicate, '__name__', predicate)}")


def queued_tasks(queue: str = "celery") -> int:
    """How many task messages wait in the broker's ``queue`` (not yet taken by a worker)."""
    from config.celery import app

    with app.connection_for_write() as connection:
        try:
            declared = connection.default_channel.queue_declare(queue=queue, passive=True)
        except connection.channel_errors:  # Redis: a queue that holds nothing does not exist
            return 0
        return declared.message_count


def worker_quiescent(timeout: float = 30.0) -> None:
    """Drive the system to quiescence before asserting that something did not happen: return
    once the broker's queue is empty and this process's worker holds no task (running,
    reserved, or waiting for a countdown) on three looks in a row; fail the test if that never
    comes. Whatever the work under test would have set going has then run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _quiet_for(polls=3):
            return
    pytest.fail(f"the worker did not become idle within {timeout}s")
