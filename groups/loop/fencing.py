"""A step's writes: every one through the ``StepWriter`` that ``fenced`` hands out, inside a
transaction that first re-checks, under FOR UPDATE on the request row, that the step's fence
still holds — so a stale or duplicate delivery, or a worker that lost its lock, never writes.
Turns are buffered in the writer and written together before anything that must come after
them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import transaction

from garden import events, metrics
from garden.models import Agent, Message
from garden.pricing import PricedCall
from garden.services.conversations import messages_append
from garden.statements import RowUpdate, row_update
from groups import lock_order, scheduling, thread_cache
from groups.domain.routing import Contribution
from groups.loop.room import Room
from groups.models import CallReservation, GroupRequest
from groups.payloads import request_event
from groups.services.requests import request_finish

# What others may change on the request row while a step runs (and the token counts and
# cost a step adds to), read back under the lock.
_COUNTERS = (
    "working_reserved",
    "synthesis_reserved",
    "maintenance_reserved",
    "input_tokens",
    "output_tokens",
    "cost",
    "unpriced_calls",
)


class StaleStep(Exception):
    """The fence moved while this step ran: another step owns the request now."""


class StepWriter:
    """Everything a step may write, handed out by ``fenced`` and good only inside its block:
    a step cannot append a turn, end its request or complete itself without holding one, and
    one kept past its block refuses (RuntimeError) rather than writing unfenced.

    Turns are buffered and written together (one seq UPDATE, one INSERT) before anything that
    must come after them, or when the block ends."""

    __slots__ = ("_open", "_turns", "room")

    def __init__(self, room: Room) -> None:
        self.room = room
        self._turns: list[Message] = []
        self._open = True

    @property
    def request(self) -> GroupRequest:
        """The step's request as the fence check read it (counters current)."""
        return self.room.request

    def _check(self) -> None:
        if not self._open:
            raise RuntimeError("a step's writer was used after its fenced block ended")

    def append(
        self,
        *,
        speaker: Agent | None,
        content: list[dict],
        kind: str = Message.Kind.TURN,
        addressed: Agent | None = None,
        reply_to_call_id: str = "",
    ) -> None:
        """Add a turn of this step (``speaker`` None: garden's); ``flush`` writes it."""
        self._check()
        room = self.room
        self._turns.append(
            Message(
                conversation_id=room.request.conversation_id,
                speaker_kind=Message.SpeakerKind.AGENT if speaker else Message.SpeakerKind.GARDEN,
                speaker_agent=speaker,
                content=content,
                kind=kind,
                request_id=room.request.pk,
                addressed_agent=addressed,
                reply_to_call_id=reply_to_call_id,
                step=room.fence,
            )
        )

    def flush(self, *, also: RowUpdate | None = None) -> None:
        """Write the buffered turns, in order, before anything that must come after them
        (``also``: the caller's next row update, in the same statement where the database
        can)."""
        self._check()
        room = self.room
        if self._turns:
            pending, self._turns = self._turns, []
            conversation_id = room.request.conversation_id
            messages_append(
                conversation_id=conversation_id, messages=pending, channel=room.channel, also=also
            )
            # Once committed, this process holds them: the next step need not read them back.
            transaction.on_commit(lambda: thread_cache.remember(conversation_id, pending))
        elif also is not None:
            row_update(also)

    def finish(self, **kwargs: Any) -> None:
        """End the request (``request_finish``'s arguments), after this step's turns."""
        self.flush()
        request_finish(request=self.room.request, **kwargs)

    def complete(self, queue: list[Contribution], **changes: Any) -> None:
        """Finish this step's writes: its turns and the request row (its queue, the completed
        fence and ``changes``), in one statement on PostgreSQL; then enqueue the next step."""
        room, request = self.room, self.room.request
        request.queue = [c.to_json() for c in queue]
        request.completed_fence = room.fence
        fields = ["queue", "completed_fence", "updated_at"]
        for name, value in changes.items():
            setattr(request, name, value)
            fields.append(name)
        self.flush(also=RowUpdate.of(request, fields))
        events.send_event_on_commit(channel=room.channel, event=request_event(request))
        if request.state in GroupRequest.STEPPABLE_STATES:
            scheduling.next_step_on_commit(request.pk, room.fence, group_id=room.group.pk)

    def save(self, *fields: str) -> None:
        """Save these fields of the request row (and ``updated_at``), after this step's turns."""
        self.flush()
        self.room.request.save(update_fields=[*fields, "updated_at"])

    def wait_for(self, reason: str) -> None:
        """Say the request waits for ``reason`` (a ``GroupRequest.WAITING_FOR_*``): saved and
        announced once, when it was not already waiting for it."""
        request = self.request
        if request.waiting_for != reason:
            request.waiting_for = reason
            self.save("waiting_for")
            events.send_event_on_commit(channel=self.room.channel, event=request_event(request))


@contextmanager
def fenced(
    room: Room, *, consume: CallReservation | None = None, call: PricedCall | None = None
) -> Iterator[StepWriter]:
    """A transaction in which this step still owns its request, and the writer for it; raises
    StaleStep (rolling back) when the fence moved or the request left the states a step may
    write in.

    Only the request row is locked: a step changes nothing group-wide, and the services that
    lock both (stop, clear, delete) take the group first, so there is no cycle. ``consume``
    marks the step's reservation consumed in the same transaction (the call ran), recording
    ``call`` (provider, model, tokens, cost) on it, and ``call``'s tokens and cost are added to
    the request's, in the statement that locks the row: counted with the reply's turns or, for
    a stale step, not at all.
    """
    request = room.request
    with transaction.atomic():
        current = lock_order.lock_request_values(
            request.pk,
            "fence",
            "state",
            *_COUNTERS,
            consume=consume.pk if consume else None,
            call=call,
        )
        if (
            current is None
            or current[0] != room.fence
            or current[1] not in GroupRequest.STEPPABLE_STATES
        ):
            metrics.fence_refused("write")
            raise StaleStep()
        request.state = current[1]
        for name, value in zip(_COUNTERS, current[2:], strict=True):
            setattr(request, name, value)
        writer = StepWriter(room)
        try:
            yield writer
            writer.flush()
        finally:
            writer._open = False
