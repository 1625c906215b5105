"""The draft of a reply being generated: its text pushed to the room as the model writes it,
throttled. The step writes the turn once, whole, under its fence; what the room was shown is
also kept for Stop, which stores it as the turn when it cuts the call short
(``groups.services.stopped_turns``), and a draft that hears of a stop ends the stream."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.conf import settings

from garden import events
from garden.models import Agent
from garden.providers import Usage
from groups.payloads import draft_event
from groups.services.stopped_turns import draft_keep, is_stopped

log = logging.getLogger(__name__)

# At most one draft per step this often: a page redraws fast enough to read along, and a
# reply quicker than this (the scripted default) pushes none.
DRAFT_INTERVAL = 0.15
# A streaming step looks for a stop this often: one cache read, however fast the text comes.
STOP_CHECK_INTERVAL = 0.5


# About how many characters a token is, to estimate what a call cut short was billed.
CHARS_PER_TOKEN = 4


def stopped_usage(sent_chars: int, shown_chars: int) -> Usage:
    """What a call Stop cut short is estimated to have cost: the projection it sent and the
    text it streamed, at CHARS_PER_TOKEN (its own usage comes only at a stream's end)."""
    return Usage(
        input_tokens=-(-sent_chars // CHARS_PER_TOKEN),
        output_tokens=-(-shown_chars // CHARS_PER_TOKEN),
    )


class CallStopped(Exception):
    """Stop ended the request while its reply streamed: the call is abandoned, and what the
    room was shown is the turn Stop kept."""


class Draft:
    """The text sink of one step's model call: collects the pieces and pushes what is new since
    the last push to the group's channel, at most every ``interval`` seconds (counted from the
    call's start) and only when there is something new, never the whole text again; after
    ``limit`` characters (GARDEN_DRAFT_MAX_CHARS) it pushes nothing more, and the turn lands
    whole when the call ends. Best effort, like every live event: nothing here raises into the
    step."""

    def __init__(
        self,
        *,
        channel: str,
        request_id: int,
        step: int,
        speaker: Agent,
        interval: float = DRAFT_INTERVAL,
        limit: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.channel = channel
        self.request_id = request_id
        self.step = step
        self.speaker = speaker
        self._interval = interval
        self._limit = settings.GARDEN_DRAFT_MAX_CHARS if limit is None else limit
        self._clock = clock
        self._last = clock()
        self._pending: list[str] = []  # pieces not pushed yet, joined once when pushed
        self._shown: list[str] = []  # what was pushed, in order
        self._sent = 0  # characters pushed so far
        self._checked = self._last

    def __call__(self, piece: str) -> None:
        now = self._clock()
        if now - self._checked >= STOP_CHECK_INTERVAL:
            self._checked = now
            if is_stopped(self.request_id):
                raise CallStopped(f"request {self.request_id} was stopped")
        if self._sent >= self._limit:
            return
        self._pending.append(piece)
        if now - self._last >= self._interval:
            self._last = now
            delta = "".join(self._pending)[: self._limit - self._sent]
            self._pending = []
            if delta:
                self._push(delta, offset=self._sent)
                self._sent += len(delta)
                self._shown.append(delta)
                draft_keep(
                    request_id=self.request_id,
                    fence=self.step,
                    agent_id=self.speaker.pk,
                    text="".join(self._shown),
                )

    @property
    def shown_chars(self) -> int:
        """How much of the reply the room was shown."""
        return self._sent

    def discard(self) -> None:
        """The call failed: the room drops what it was shown (an empty draft), and Stop finds
        nothing of it to keep."""
        if self._sent:
            self._push("", offset=0)
            draft_keep(
                request_id=self.request_id, fence=self.step, agent_id=self.speaker.pk, text=""
            )

    def _push(self, text: str, *, offset: int) -> None:
        try:
            event = draft_event(
                request_id=self.request_id,
                step=self.step,
                agent=self.speaker,
                text=text,
                offset=offset,
            )
            events.send_event_without_waiting_for_commit(channel=self.channel, event=event)
        except Exception:
            log.warning("draft of request %s not pushed", self.request_id, exc_info=True)
