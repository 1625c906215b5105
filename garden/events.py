"""Live updates: typed events pushed to a Channels group, only after the transaction commits.

Channels delivers at most once, so every event carries the conversation ``seq`` (when it has
one) and clients re-fetch from the API on reconnect or on a gap. Pushes are handed to one
background event loop per process, so a step never waits on the channel layer; one process's
pushes to a channel reach it in the order they were made.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction

from garden import effects
from garden.event_schema import check_event

log = logging.getLogger(__name__)


def conversation_channel(conversation_id: int) -> str:
    return f"conversation-{conversation_id}"


def group_channel(group_id: int) -> str:
    return f"group-{group_id}"


def send_event_on_commit(*, channel: str, event: dict[str, Any]) -> None:
    """Push ``event`` to ``channel`` once the current transaction commits (at once if none).

    The payload is round-tripped through JSON here so a non-serialisable event fails at the
    call site, inside the transaction, rather than silently after commit.
    """
    payload = _checked(event)
    transaction.on_commit(lambda: _push_without_waiting_for_commit(channel, payload))


def send_event_without_waiting_for_commit(*, channel: str, event: dict[str, Any]) -> None:
    """Push ``event`` to ``channel`` at once, waiting neither for a commit nor for the end of
    a ``deferred`` block: for what is committed already (a step's reservation) or is
    never stored (the draft of a reply being generated). Best effort: a failure to push is
    logged, never raised, so the step that sends it goes on."""
    payload = _checked(event)
    try:
        _pusher.push(channel, payload)
    except Exception:
        log.warning("event push to %s failed", channel, exc_info=True)


def _checked(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` as JSON carries it; checked against its registered serializer when
    GARDEN_CHECK_EVENTS (by default DEBUG) is on, so a field added to a payload without its
    serializer fails where it is sent."""
    payload = json.loads(json.dumps(event))
    if settings.GARDEN_CHECK_EVENTS:
        check_event(payload)
    return payload


class _Pusher:
    """One event loop thread per process that owns the channel layer's connections. Each
    channel's pushes are sent one after another, in the order they were made: a draft pushed
    mid-step must not arrive after the turn that replaces it. At most
    GARDEN_EVENT_PUSHES_IN_FLIGHT sends are under way at once, the rest waiting their turn,
    so a worker stepping a thousand rooms holds a few connections to the layer, not one per
    room."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0
        self._pending: set[Future] = set()
        # The last send of each channel; read and replaced only on the loop's thread.
        self._tails: dict[str, asyncio.Future] = {}
        self._sending: asyncio.Semaphore | None = None

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # a forked child starts afresh
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="garden-events", daemon=True).start()
                self._loop, self._pid, self._pending, self._tails = loop, os.getpid(), set(), {}
                self._sending = asyncio.Semaphore(settings.GARDEN_EVENT_PUSHES_IN_FLIGHT)
            return self._loop

    def push(self, channel: str, payload: dict[str, Any]) -> None:
        future = asyncio.run_coroutine_threadsafe(
            self._send_in_order(channel, payload), self._ensure_loop()
        )
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)

    async def _send_in_order(self, channel: str, payload: dict[str, Any]) -> None:
        # Coroutines handed to the loop start in the order they were handed over, so the
        # tail read here (before the first await) is the push made just before this one.
        previous = self._tails.get(channel)
        current = asyncio.current_task()
        assert current is not None
        self._tails[channel] = current
        try:
            if previous is not None:
                await asyncio.wait([previous])
            assert self._sending is not None
            async with self._sending:
                await _send(channel, payload)
        finally:
            if self._tails.get(channel) is current:
                del self._tails[channel]

    def _done(self, future: Future) -> None:
        with self._lock:
            self._pending.discard(future)

    def wait_until_sent(self, timeout: float = 5.0) -> None:
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.result(timeout=timeout)


async def _send(channel: str, payload: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(channel, {"type": "garden.event", "event": payload})
    except Exception:  # a dropped push is recovered by the client's re-fetch
        log.warning("event push to %s failed", channel, exc_info=True)


_pusher = _Pusher()


def _push_without_waiting_for_commit(channel: str, payload: dict[str, Any]) -> None:
    collecting = effects.current()
    if collecting is None:
        _pusher.push(channel, payload)
    else:
        collecting.events.append((channel, payload))


def deferred() -> AbstractContextManager[effects.Effects]:
    """A block whose committed events (and after-commit sends) wait for its end: pushed then,
    batched per channel (``garden.effects``)."""
    return effects.deferred(_pusher.push)


def push_deferred(collected: effects.Effects) -> None:
    """Push what ``collected`` holds of events now, before the block ends (its sends wait)."""
    collected.push_events(_pusher.push)


def wait_until_sent(timeout: float = 5.0) -> None:
    """Block until every push handed over so far has reached the channel layer."""
    _pusher.wait_until_sent(timeout)
