"""One step of a group request: claim the fence, pick the speaker, project, reserve,
dispatch, record. A step makes at most one model call; no transaction is open while the
model runs or a tool does network I/O. The step's modules: ``claim`` and ``room`` (what it
reads), ``waits`` (when it cannot call now), ``replies`` and ``failures`` (what a call left),
``fencing`` (how it writes), ``asks`` and ``tool_calls`` (what a reply asks for)."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from garden import events, heartbeat, metrics, telemetry
from garden.budgets import budget_check, budget_spend
from garden.models import Agent
from garden.providers import ChatReply, ChatRequest, ProviderError
from garden.slots import HeldSlot, LockLost, slot_hold
from groups import budget
from groups.domain.bounding import RoomTooLarge
from groups.domain.outcomes import StepOutcome
from groups.domain.routing import Contribution
from groups.faults import fault_point
from groups.group_lock import group_lock, group_lock_keep_with_slot
from groups.loop.asks import begin_synthesis, skip_member
from groups.loop.claim import claim_room, claimed_room
from groups.loop.drafts import CallStopped, Draft, stopped_usage
from groups.loop.failures import after_failure, end_without_summary
from groups.loop.fencing import StaleStep, fenced
from groups.loop.replies import record_reply
from groups.loop.room import Room, dispatch, room_projection
from groups.loop.tool_calls import resume_tools, tool_specs
from groups.loop.waits import stop_waiting, token_budget_spent, wait_for_call_slot
from groups.models import WORKING_CALLS, CallReservation, Group, GroupRequest
from groups.payloads import request_event
from groups.scheduling import NextStep
from groups.selectors import request_trace_context
from groups.statements import Claim

log = logging.getLogger(__name__)


def _traced(step: Callable[..., StepOutcome]) -> Callable[..., StepOutcome]:
    """``step`` with, when traces are on, a ``garden.step`` span of the request's one trace,
    whichever process sent it (garden/telemetry.py), and its time in the step metrics."""

    @functools.wraps(step)
    def traced(**kwargs: Any) -> StepOutcome:
        request_id = kwargs["request_id"]
        with (
            metrics.step_timed() as ended,
            telemetry.step_span(
                request_id=request_id,
                fence=kwargs["fence"],
                group_id=kwargs.get("group_id"),
                attempt=kwargs.get("attempt", 1),
                tools=kwargs.get("tools", False),
                trace_context=lambda: _trace_of(request_id),
            ) as span,
        ):
            outcome = step(**kwargs)
            span.outcome(outcome)
            return ended(outcome)

    return traced


def advance_request(
    *,
    request_id: int,
    fence: int,
    attempt: int = 1,
    first_at: float | None = None,
    group_id: int | None = None,
    waits: int = 0,
    tools: bool = False,
    steps: int = 1,
) -> StepOutcome:
    """Run the step of ``request_id`` expected at ``fence`` — and, with ``steps`` > 1, the
    request's next steps after it in place, up to ``steps`` in all. Returns what the last
    one did, for logs.

    ``group_id`` (the request's group, which never changes) saves a lookup; steps enqueued
    by the loop carry it. Raises LockContended when another worker holds the group's lock
    (the task retries). The owner's call slot is taken before anything is claimed or
    projected: a step that finds none comes back later, having written nothing
    (``groups.loop.waits.wait_for_call_slot``; ``waits`` counts its earlier looks). ``tools``
    continues the step that claimed ``fence`` and waits for a tool slot
    (groups/loop/tool_calls.py resume_tools).

    Going on in place: a step that completes leaves its request's next step as the
    delivery's continuation (``scheduling.next_step_on_commit``). While this delivery may
    (``steps``, GARDEN_STEP_CONTINUE_SECONDS, no worker shutdown) and the group's lock is
    still its own (extended to a whole TTL again), it runs that step itself, holding the lock
    throughout: no broker hop, no lock taken again. Otherwise it sends it, once the lock is
    released. Every step claims its own fence, so the continuation is exactly the step the
    broker would have delivered.
    """
    if group_id is None:
        group_id = (
            GroupRequest.objects.filter(pk=request_id).values_list("group_id", flat=True).first()
        )
        if group_id is None:
            return StepOutcome.MISSING
    owner_id = _owner_of(group_id)
    if owner_id is None:
        return StepOutcome.MISSING
    # The next step is sent only once this one's lock is released, so it never finds the lock
    # still held (the step's effects collector delivers it then, after the step's events). A
    # crash between the two is what the sweeper recovers, by fence.
    with events.deferred() as effects:
        try:
            with group_lock(group_id) as token:
                began = time.monotonic()
                outcome = _locked_step(
                    request_id=request_id,
                    fence=fence,
                    group_id=group_id,
                    owner_id=owner_id,
                    attempt=attempt,
                    first_at=first_at,
                    waits=waits,
                    tools=tools,
                    goes_on=steps > 1 and _may_go_on(began),
                )
                ran = 1
                while ran < steps:
                    following = effects.continuation
                    if following is None or following.key[:1] != (request_id,):
                        break
                    following_step: NextStep = following.key
                    if not _may_go_on(began):
                        break
                    try:
                        slot = group_lock_keep_with_slot(group_id, token, owner_id=owner_id)
                    except LockLost:
                        break
                    effects.take_continuation()
                    # This step's events reach the room now, not when the delivery ends.
                    events.push_deferred(effects)
                    fault_point("after_write")
                    ran += 1
                    try:
                        outcome = _locked_step(
                            request_id=request_id,
                            fence=following_step.fence,
                            group_id=group_id,
                            owner_id=owner_id,
                            attempt=1,
                            first_at=None,
                            waits=0,
                            tools=False,
                            lock="extended",
                            slot=slot,
                            claimed=following_step.claim,
                            goes_on=ran < steps and _may_go_on(began),
                        )
                    except Exception:
                        # The task's retry delivers its first fence, long since passed: this
                        # step goes back to the broker at its own, once the lock is released
                        # (its claim, if its write made one, is taken over as a lost one's).
                        effects.sends.append(following.deliver)
                        raise
                return outcome
        finally:
            # A next step sent rather than run in place does not make the call reserved for it.
            if effects.continuation is not None:
                _give_back(getattr(effects.continuation.key, "claim", None))
            events.push_deferred(effects)
            fault_point("after_write")


def _give_back(claim: Claim | None) -> None:
    """The call reserved ahead for a step this delivery will not run: given back, never
    dispatched (the step the broker delivers instead reserves its own)."""
    if claim is not None and claim.reservation is not None:
        budget.give_back_ahead(reservation=claim.reservation)


def _may_go_on(began: float) -> bool:
    """Whether a delivery that began at ``began`` may start another step in place: within its
    window (so it ends within the task's soft limit and leaves the thread to other groups'
    steps) and while its worker is not shutting down."""
    return (
        time.monotonic() - began < settings.GARDEN_STEP_CONTINUE_SECONDS
        and not heartbeat.shutting_down()
    )


@_traced
def _locked_step(
    *,
    request_id: int,
    fence: int,
    group_id: int,
    owner_id: int,
    attempt: int,
    first_at: float | None,
    waits: int,
    tools: bool,
    lock: str = "acquired",
    slot: HeldSlot | bool | None = False,
    claimed: Claim | None = None,
    goes_on: bool = False,
) -> StepOutcome:
    """One step, the group's lock held by the caller (``lock``: taken for it, or "extended"
    into it from the step before, which also looked for its call ``slot``: False when not
    looked for yet; ``claimed``: the claim that step's write made of this step's fence).
    ``goes_on``: the delivery may run the next step in place, so this step's write may claim
    its fence."""
    telemetry.event(f"garden.lock.{lock}", {"garden.group.id": group_id})
    try:
        if tools:
            return resume_tools(request_id=request_id, fence=fence, group_id=group_id, waits=waits)
        if slot is False:
            slot = slot_hold(owner_id=owner_id)
        if slot is None:
            _give_back(claimed)
            return wait_for_call_slot(request_id, fence, group_id, attempt=attempt, waits=waits)
        with slot:
            room = claimed_room(claimed) if claimed else claim_room(request_id, fence, group_id)
            if room is None:
                metrics.fence_refused("claim")
                return StepOutcome.STALE
            room.goes_on = goes_on
            return _step(room, slot=slot, attempt=attempt, first_at=first_at or time.time())
    except StaleStep:
        return StepOutcome.STALE


# Each group's owner (which never changes), by group id: the slot is taken before the claim
# reads the group row.
_owners: dict[int, int] = {}


# Each request's trace (its traceparent, which never changes once accepted), by request id,
# read only with traces on: a worker's later steps of a request pay no query to join it.
_traces: dict[int, str] = {}


def forget_owners() -> None:
    """Drop the owners and traces kept (a test's fresh database may hand out the same ids
    again)."""
    _owners.clear()
    _traces.clear()


def _trace_of(request_id: int) -> str:
    trace_context = _traces.get(request_id)
    if trace_context is None:
        trace_context = request_trace_context(request_id=request_id)
        if len(_traces) >= 10_000:
            _traces.clear()
        _traces[request_id] = trace_context
    return trace_context


def _owner_of(group_id: int) -> int | None:
    owner_id = _owners.get(group_id)
    if owner_id is None:
        owner_id = Group.objects.filter(pk=group_id).values_list("owner_id", flat=True).first()
        if owner_id is not None:
            if len(_owners) >= 10_000:
                _owners.clear()
            _owners[group_id] = owner_id
    return owner_id


def _step(room: Room, *, slot: HeldSlot, attempt: int, first_at: float) -> StepOutcome:
    """The step's work once its fence is claimed; a call the step before reserved for it
    (``room.reserved_ahead``) is its reservation when it makes that call, and is given back
    (never dispatched) when it makes another or none."""
    try:
        return _claimed_step(room, slot=slot, attempt=attempt, first_at=first_at)
    finally:
        if room.reserved_ahead is not None:
            budget.give_back_ahead(reservation=room.reserved_ahead)
            room.reserved_ahead = None


def _claimed_step(room: Room, *, slot: HeldSlot, attempt: int, first_at: float) -> StepOutcome:
    request = room.request
    queue = [Contribution.from_json(c) for c in request.queue]
    speaker, purpose = room.next_speaker(queue)
    if speaker is None:
        return skip_member(room, queue, "is no longer able to run")
    if room.group.is_solo and not speaker.can_run:
        # Its model account was taken away, or the agent removed, after the message came.
        with fenced(room) as w:
            w.finish(
                state=GroupRequest.State.FAILED,
                outcome_code="AGENT_CANNOT_RUN",
                outcome=f"@{speaker.handle} cannot run now.",
                notice=f"@{speaker.handle} cannot run now: it has no model account or was "
                "removed. The request ended.",
            )
        return StepOutcome.AGENT_CANNOT_RUN

    spent = budget_check(owner_id=room.group.owner_id, account=speaker.model_account)
    if spent is not None:
        member = purpose == CallReservation.Purpose.WORKING and bool(queue)
        return token_budget_spent(room, speaker, queue, spent, member=member, attempt=attempt)

    synthesis = purpose == CallReservation.Purpose.SYNTHESIS
    projection = room_projection(room, speaker, synthesis=synthesis)
    if isinstance(projection, RoomTooLarge):
        with fenced(room) as w:
            w.finish(
                state=GroupRequest.State.FAILED,
                outcome_code=projection.code,
                outcome=f"The room ({projection.needed} chars) cannot fit the cap of {projection.cap}.",
                notice=f"The room is too large to carry ({projection.needed} characters, cap "
                f"{projection.cap}); the request ended. {projection.reason}",
            )
        return StepOutcome.ROOM_TOO_LARGE

    fault_point("before_reserve")
    failure: ProviderError | None = None
    with slot:
        if request.waiting_for:
            stop_waiting(room)
        ahead, room.reserved_ahead = room.reserved_ahead, None
        if ahead is not None and (ahead.purpose, ahead.agent_id) == (purpose, speaker.pk):
            # Reserved by the write that claimed this fence: this is the call it named.
            reservation, reserved_at = ahead, ahead.created_at
        else:
            if ahead is not None:
                # Reserved for another call (the roster or the state moved since): given back
                # before this one is reserved, so it does not count against it.
                budget.give_back_ahead(reservation=ahead)
            reserved_at = timezone.now()
            reservation = budget.reserve_call(
                request_id=request.pk,
                purpose=purpose,
                agent_id=speaker.pk,
                fence=room.fence,
                attempt=attempt,
                at=reserved_at,
            )
        if reservation is None:
            if purpose == CallReservation.Purpose.WORKING:
                return begin_synthesis(
                    room, f"The working budget is spent ({WORKING_CALLS} calls)."
                )
            with fenced(room) as w:
                end_without_summary(w, "the synthesis call was already used")
            return StepOutcome.SYNTHESIS_SPENT

        telemetry.annotate(
            {"garden.reservation.purpose": purpose, "gen_ai.agent.name": speaker.handle}
        )
        fault_point("before_dispatch")
        _announce_speaker(room, speaker, reserved_at)
        tools = () if synthesis else tool_specs(room, speaker)
        draft = Draft(channel=room.channel, request_id=request.pk, step=room.fence, speaker=speaker)
        called = time.monotonic()
        try:
            reply = dispatch(
                speaker,
                ChatRequest(system=projection.system, messages=projection.messages, tools=tools),
                on_text=draft,
                purpose=purpose,
            )
        except ProviderError as exc:
            failure = exc
            draft.discard()
        except CallStopped:
            # Stop kept what the room was shown and counted the call; a call it found nothing
            # of to keep is counted here. Nothing else of this step is written. The provider
            # reports usage at a stream's end, which never came, yet the call was billed:
            # the owner's token budget on a shared credential is charged an estimate.
            budget.consume_call(reservation=reservation, reason="stopped")
            budget_spend(
                owner_id=room.group.owner_id,
                account=speaker.model_account,
                usage=stopped_usage(projection.char_count(), draft.shown_chars),
            )
            return StepOutcome.STOPPED
        _count_call(speaker, purpose, failure, None if failure else reply, called)
    # The owner's slot is free again before anything is recorded or any tool runs.
    if failure is None:
        # Spent on the credential whatever becomes of the step (a stale one's too).
        budget_spend(owner_id=room.group.owner_id, account=speaker.model_account, usage=reply.usage)
    if failure is not None:
        return after_failure(
            room, speaker, purpose, reservation, failure, attempt=attempt, first_at=first_at
        )
    fault_point("after_reply")
    return record_reply(room, speaker, purpose, reservation, reply, queue)


def _count_call(
    speaker: Agent, purpose: str, failure: ProviderError | None, reply: ChatReply | None, at: float
) -> None:
    """The call's latency and tokens in the metrics (garden/metrics.py), by provider and model."""
    account = speaker.model_account
    usage = reply.usage if reply is not None else None
    metrics.model_call(
        provider=account.provider if account else "none",
        model=account.model if account else "",
        purpose=purpose,
        outcome="ok" if failure is None else failure.code,
        seconds=time.monotonic() - at,
        input_tokens=usage.input_tokens if usage else 0,
        output_tokens=usage.output_tokens if usage else 0,
    )


def _announce_speaker(room: Room, speaker: Agent, since: datetime) -> None:
    """The room learns who works now and since when as the call goes out, not when the step
    ends: the request as its reservation left it (committed; the reservation named the
    speaker on the row), pushed at once rather than with the step's batch."""
    request = room.request
    request.working_agent, request.working_since, request.working_fence = (
        speaker,
        since,
        room.fence,
    )
    events.send_event_without_waiting_for_commit(channel=room.channel, event=request_event(request))
