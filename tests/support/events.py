"""What garden pushed to Channels during a test, in order (Zulip's capture_send_event_calls)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

PushedEvent = tuple[str, dict[str, Any]]


@contextmanager
def capturing_events() -> Iterator[list[PushedEvent]]:
    """Record every ``(channel, payload)`` that reaches the pusher (after commit, after a
    ``deferred`` block, or at once for the senders that do not wait), and still push it."""
    from garden import events

    pushed: list[PushedEvent] = []
    push = events._pusher.push

    def record(channel: str, payload: dict[str, Any]) -> None:
        pushed.append((channel, payload))
        push(channel, payload)

    events._pusher.push = record
    try:
        yield pushed
    finally:
        del events._pusher.push  # the instance attribute goes; the class's method is back
