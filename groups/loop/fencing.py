"""A step's writes: every one through the ``StepWriter`` that ``fenced`` hands out, inside a
transaction that first re-checks, under FOR UPDATE on the request row, that the step's fence
still holds — so a stale or duplicate delivery, or a worker that lost its lock, never writes.
Turns are buffered in the writer and written together before anything that must come after
them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from django.db import transaction
from django.utils import timezone

from garden import events, metrics
from garden.models import Agent, Message
from garden.payloads import message_created_event
from garden.pricing import PricedCall
from garden.services.conversations import messages_append, stored_bytes_of
from garden.statements import RowUpdate, row_update
from groups import lock_order, scheduling, thread_cache
from groups.domain.routing import Contribution
from groups.loop.room import Room
from groups.models import CallReservation, GroupRequest
from groups.payloads import request_event
from groups.services.requests import request_finish
from groups.statements import Claim, NextCall, StepRecord

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
    must come after them, or when the block ends.

    A writer handed out by ``fenced(..., at_once=True)`` has not re-checked the fence yet: a
    block that only appends turns and completes the step is written whole at its end, the
    re-check included (``groups.statements.record_step``: one statement on PostgreSQL); the
    first use of anything else opens the transaction and re-checks then, as ``fenced`` does."""

    __slots__ = ("_completion", "_open", "_pending", "_turns", "room")

    def __init__(self, room: Room, pending: _Pending | None = None) -> None:
        self.room = room
        self._turns: list[Message] = []
        self._open = True
        self._pending = pending
        self._completion: tuple[list[Contribution], dict[str, Any]] | None = None

    @property
    def request(self) -> GroupRequest:
        """The step's request as the fence check read it (counters current)."""
        self.checked()
        return self.room.request

    def _check(self) -> None:
        if not self._open:
            raise RuntimeError("a step's writer was used after its fenced block ended")

    def checked(self) -> None:
        """Open the transaction and re-check the fence now, if it is still to be done: what
        writes other than through this writer (an approval, an artifact) calls it first."""
        self._check()
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.enter()
            if self._completion is not None:
                queue, changes = self._completion
                self._completion = None
                self.complete(queue, **changes)

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
        self.checked()
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
        self._check()
        if self._pending is not None:
            # Written at the block's end with the re-check (``close``).
            self._completion = (queue, changes)
            return
        request = self._completed(queue, changes)
        self.flush(also=RowUpdate.of(request, self._completed_fields(changes)))
        self._announce(request)

    def _completed(self, queue: list[Contribution], changes: dict[str, Any]) -> GroupRequest:
        room, request = self.room, self.room.request
        request.queue = [c.to_json() for c in queue]
        request.completed_fence = room.fence
        for name, value in changes.items():
            setattr(request, name, value)
        return request

    @staticmethod
    def _completed_fields(changes: dict[str, Any]) -> list[str]:
        return ["queue", "completed_fence", "updated_at", *changes]

    def _announce(self, request: GroupRequest, claim: Claim | None = None) -> None:
        """The completed request to the room, and its next step as the delivery's
        continuation (``claim``: the next fence, claimed already by the step's write)."""
        room = self.room
        events.send_event_on_commit(channel=room.channel, event=request_event(request))
        if request.state in GroupRequest.STEPPABLE_STATES:
            scheduling.next_step_on_commit(
                request.pk, room.fence, group_id=room.group.pk, claim=claim
            )

    def close(self) -> None:
        """The block ended well: a writer that never re-checked writes the step's turns and
        its completion together with the re-check (StaleStep, nothing written, when the
        fence moved); any other writes what it still buffers."""
        pending = self._pending
        if pending is None or self._completion is None or not self._turns:
            self.checked()
            self.flush()
            return
        self._pending = None
        queue, changes = self._completion
        room = self.room
        request = self._completed(queue, changes)
        claim_next = room.goes_on and request.state in GroupRequest.STEPPABLE_STATES
        reserve_next = None
        if claim_next:
            speaker, purpose = room.next_speaker(queue)
            if speaker is not None and speaker.can_run:
                reserve_next = NextCall(purpose=purpose, agent_id=speaker.pk, at=timezone.now())
        turns, self._turns = self._turns, []
        recorded = lock_order.record_step(
            StepRecord(
                request_id=request.pk,
                fence=room.fence,
                update=RowUpdate.of(request, self._completed_fields(changes)),
                messages=turns,
                stored=stored_bytes_of(turns),
                consume=pending.consume,
                call=pending.call,
                fields=_COUNTERS,
                claim_next=claim_next,
                reserve_next=reserve_next,
            )
        )
        if recorded is None:
            metrics.fence_refused("write")
            raise StaleStep()
        for name, value in zip(_COUNTERS, recorded.values, strict=True):
            setattr(request, name, value)
        conversation_id = request.conversation_id
        for message in turns:
            events.send_event_on_commit(channel=room.channel, event=message_created_event(message))
        transaction.on_commit(lambda: thread_cache.remember(conversation_id, turns))
        self._announce(request, recorded.claim)

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


class _Pending:
    """The re-check a writer handed out ``at_once`` has still to make: ``enter`` opens the
    block's transaction (on ``stack``) and makes it."""

    __slots__ = ("call", "consume", "room", "stack")

    def __init__(
        self, room: Room, stack: ExitStack, consume: int | None, call: PricedCall | None
    ) -> None:
        self.room, self.stack, self.consume, self.call = room, stack, consume, call

    def enter(self) -> None:
        self.stack.enter_context(transaction.atomic())
        _recheck(self.room, consume=self.consume, call=self.call)


def _recheck(room: Room, *, consume: int | None, call: PricedCall | None) -> None:
    """Under FOR NO KEY UPDATE on the request row: StaleStep when the fence moved or the
    request left the states a step may write in; else the room's request takes the counters
    as they are (``consume`` consumed and ``call`` counted first)."""
    request = room.request
    current = lock_order.lock_request_values(
        request.pk, "fence", "state", *_COUNTERS, consume=consume, call=call
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


@contextmanager
def fenced(
    room: Room,
    *,
    consume: CallReservation | None = None,
    call: PricedCall | None = None,
    at_once: bool = False,
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

    ``at_once``: the block writes only when it ends or first needs to (see StepWriter), so a
    step that only appends and completes is one write.
    """
    with ExitStack() as stack:
        if at_once:
            pending = _Pending(room, stack, consume.pk if consume else None, call)
            writer = StepWriter(room, pending)
        else:
            stack.enter_context(transaction.atomic())
            _recheck(room, consume=consume.pk if consume else None, call=call)
            writer = StepWriter(room)
        try:
            yield writer
            writer.close()
        finally:
            writer._open = False
