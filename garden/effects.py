"""What a unit of work defers until it ends: one collector, installed for the block.

A step of the group loop runs inside ``deferred()``: the live events it commits are kept and
pushed when it ends, one ``{"type": "batch", "events": [...]}`` per channel (one channel-layer
send per step instead of one per turn), and the task sends it makes after commit are
delivered then too, in order — once the step's lock is released, so the task a step sends
never finds the lock still held. Outside a block both happen at once, after commit, as
before. Events rolled back never reach the collector (they are handed over on commit).

A block may also hold one *continuation*: the send that would carry its work on (a group
step's next step). The block that installed the collector may take it and do that work itself
(``take_continuation``); a continuation not taken is delivered when the block ends, as a send.

``garden.events`` and ``garden.scheduling`` hand their after-commit work here; nothing else
needs to know whether it runs inside a step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

Push = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class Continuation:
    """Work a block may carry on itself: ``key`` says what it is (to the block that installed
    the collector), ``deliver`` sends it instead."""

    key: tuple[Any, ...]
    deliver: Callable[[], None]


class Effects:
    """The events and sends one block deferred, released together when it ends."""

    __slots__ = ("continuation", "events", "sends")

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.sends: list[Callable[[], None]] = []
        self.continuation: Continuation | None = None

    def take_continuation(self) -> Continuation | None:
        """The continuation the block holds, now the taker's to run or to ``send_later``."""
        taken, self.continuation = self.continuation, None
        return taken

    def push_events(self, push: Push) -> None:
        """Push the events kept so far, batched by channel in the order they came."""
        events, self.events = self.events, []
        by_channel: dict[str, list[dict[str, Any]]] = {}
        for channel, payload in events:
            by_channel.setdefault(channel, []).append(payload)
        for channel, payloads in by_channel.items():
            push(
                channel,
                payloads[0] if len(payloads) == 1 else {"type": "batch", "events": payloads},
            )

    def release(self, push: Push) -> None:
        """Push the events, then deliver the sends in order (each once)."""
        self.push_events(push)
        if self.continuation is not None:
            self.sends.append(self.take_continuation().deliver)
        sends, self.sends = self.sends, []
        for deliver in sends:
            deliver()


_current: ContextVar[Effects | None] = ContextVar("garden_effects", default=None)


def current() -> Effects | None:
    """The collector of the block running now, if any."""
    return _current.get()


@contextmanager
def deferred(push: Push) -> Iterator[Effects]:
    """Collect what the block defers; release it through ``push`` (events) when it ends,
    however it ends."""
    effects = Effects()
    token = _current.set(effects)
    try:
        yield effects
    finally:
        _current.reset(token)
        effects.release(push)
