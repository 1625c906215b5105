"""One step of a group request: claim the fence, pick the speaker, project, reserve,
dispatch, record. A step makes at most one model call; no transaction is open while the
model runs or a tool does network I/O. The step's modules: ``room`` (what it reads),
``fencing`` (how it writes), ``asks`` and ``tool_use`` (what a reply asks for)."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from garden import events, metrics, telemetry
from garden.budgets import DAY, BudgetSpent, budget_check, budget_spend
from garden.errors import QuotaExceeded
from garden.models import Agent
from garden.pricing import price_call
from garden.providers import (
    ChatReply,
    ChatRequest,
    MalformedReply,
    ProviderConfigError,
    ProviderError,
    ReplyTooLarge,
    ToolCall,
)
from garden.services.attachments import artifact_ref_block
from garden.services.conversations import text_block
from garden.slots import HeldSlot, slot_backoff, slot_hold
from garden.tools import ToolOutcome, needs_approval
from garden.transcript import blocks_to_json
from groups import budget, row_locks, scheduling, tool_use
from groups.asks import ask, begin_synthesis, member_finished, request_help, skip_member
from groups.bounding import RoomTooLarge
from groups.drafts import Draft
from groups.faults import fault_point
from groups.fencing import StaleStep, StepWriter, fenced
from groups.locks import LockContended, group_lock
from groups.models import WORKING_CALLS, CallReservation, Group, GroupRequest
from groups.outcomes import StepOutcome
from groups.payloads import request_event
from groups.room import Room, dispatch, load_room, room_projection
from groups.routing import Contribution
from groups.selectors import request_trace_context
from groups.tool_use import (
    keep_from_sweeper,
    resume_tools,
    run_tools,
    suspend_for_approval,
    tool_specs,
)

log = logging.getLogger(__name__)


def _traced(step: Callable[..., StepOutcome]) -> Callable[..., StepOutcome]:
    """``step`` with, when traces are on, a ``garden.step`` span of the request's one trace,
    whichever process sent it (garden/telemetry.py)."""

    @functools.wraps(step)
    def traced(**kwargs: Any) -> StepOutcome:
        request_id = kwargs["request_id"]
        with telemetry.step_span(
            request_id=request_id,
            fence=kwargs["fence"],
            group_id=kwargs.get("group_id"),
            attempt=kwargs.get("attempt", 1),
            tools=kwargs.get("tools", False),
            trace_context=lambda: _trace_of(request_id),
        ) as span:
            try:
                outcome = step(**kwargs)
            except LockContended:
                span.outcome("lock_contended")
                raise
            span.outcome(outcome)
            return outcome

    return traced


@_traced
def advance_request(
    *,
    request_id: int,
    fence: int,
    attempt: int = 1,
    first_at: float | None = None,
    group_id: int | None = None,
    waits: int = 0,
    tools: bool = False,
) -> StepOutcome:
    """Run one step of ``request_id`` expected at ``fence``. Returns what happened, for logs.

    ``group_id`` (the request's group, which never changes) saves a lookup; steps enqueued
    by the loop carry it. Raises LockContended when another worker holds the group's lock
    (the task retries). The owner's call slot is taken before anything is claimed or
    projected: a step that finds none comes back later, having written nothing
    (``_wait_for_call_slot``; ``waits`` counts its earlier looks). ``tools`` continues the
    step that claimed ``fence`` and waits for a tool slot (groups/tool_use.py resume_tools).
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
            with group_lock(group_id):
                try:
                    if tools:
                        return resume_tools(
                            request_id=request_id, fence=fence, group_id=group_id, waits=waits
                        )
                    slot = slot_hold(owner_id=owner_id)
                    if slot is None:
                        return _wait_for_call_slot(
                            request_id, fence, group_id, attempt=attempt, waits=waits
                        )
                    with slot:
                        room = _claim_room(request_id, fence, group_id)
                        if room is None:
                            metrics.fence_refused("claim")
                            return StepOutcome.STALE
                        return _step(
                            room, slot=slot, attempt=attempt, first_at=first_at or time.time()
                        )
                except StaleStep:
                    return StepOutcome.STALE
        finally:
            events.push_deferred(effects)
            fault_point("after_write")


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


@telemetry.traced("garden.claim")
def _claim_room(request_id: int, fence: int, group_id: int) -> Room | None:
    """Claim the step's fence and read its room; None for a stale or duplicate delivery.

    On PostgreSQL the claim returns the request and group rows in the same statement.
    """
    if connection.vendor != "postgresql":
        my_fence = _claim(request_id, fence, group_id)
        return None if my_fence is None else load_room(request_id, my_fence)
    claimed = row_locks.claim_fence(request_id=request_id, fence=fence, group_id=group_id)
    if claimed is None:
        _continue_if_lost(request_id, fence, group_id)
        return None
    if claimed.request.fence == fence + 2:
        budget.settle_lost_reservations(request_id=request_id, below_fence=fence + 2)
    room = load_room(
        request_id,
        claimed.request.fence,
        request=claimed.request,
        group=claimed.group,
        roster_stamp=claimed.roster_stamp,
    )
    room.thread_last_seq = claimed.thread_last_seq
    return room


def _claim(request_id: int, fence: int, group_id: int) -> int | None:
    """Take the next fence for this step, or None for a stale or duplicate delivery.

    A fence claimed by a step that never completed (its worker died; we hold the lock, so
    it is not running) is claimed again one higher, which also shuts out that step if it
    ever wakes. A delivery that finds the last step completed with nothing claimed after it
    re-enqueues the continuation, in case a crash lost it between commit and enqueue.
    """
    now = timezone.now()
    # Only under the lock of the request's own group: a wrong ``group_id`` claims nothing.
    live = GroupRequest.objects.filter(
        pk=request_id, group_id=group_id, state__in=GroupRequest.STEPPABLE_STATES
    )
    if live.filter(fence=fence).update(fence=fence + 1, updated_at=now):
        return fence + 1
    lost = live.filter(fence=fence + 1, completed_fence__lt=fence + 1).exclude(
        waiting_for=GroupRequest.WAITING_FOR_TOOL_SLOT, updated_at__gt=row_locks.tool_wait_cutoff()
    )
    if lost.update(fence=fence + 2, updated_at=now):
        budget.settle_lost_reservations(request_id=request_id, below_fence=fence + 2)
        return fence + 2
    _continue_if_lost(request_id, fence, group_id)
    return None


def _continue_if_lost(request_id: int, fence: int, group_id: int) -> None:
    """A delivery that claimed nothing but finds the last step completed with nothing
    claimed after it re-enqueues the continuation (a crash may have lost it)."""
    row = (
        GroupRequest.objects.filter(
            pk=request_id, group_id=group_id, state__in=GroupRequest.STEPPABLE_STATES
        )
        .values("fence", "completed_fence")
        .first()
    )
    if row and row["fence"] == row["completed_fence"] == fence + 1:
        scheduling.enqueue_step(request_id, fence + 1, group_id=group_id)


def _step(room: Room, *, slot: HeldSlot, attempt: int, first_at: float) -> StepOutcome:
    request = room.request
    queue = [Contribution.from_json(c) for c in request.queue]
    if request.state == GroupRequest.State.SYNTHESIZING:
        speaker, purpose = room.coordinator, CallReservation.Purpose.SYNTHESIS
    elif queue:
        speaker = room.members.get(queue[0].agent)
        purpose = CallReservation.Purpose.WORKING
        if speaker is None or not speaker.can_run:
            return skip_member(room, queue, "is no longer able to run")
    else:
        speaker, purpose = room.coordinator, CallReservation.Purpose.WORKING
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
        return _budget_spent(room, speaker, queue, spent, member=member, attempt=attempt)

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
            _stop_waiting(room)
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
                _end_without_summary(w, "the synthesis call was already used")
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
        _count_call(speaker, purpose, failure, None if failure else reply, called)
    # The owner's slot is free again before anything is recorded or any tool runs.
    if failure is None:
        # Spent on the credential whatever becomes of the step (a stale one's too).
        budget_spend(owner_id=room.group.owner_id, account=speaker.model_account, usage=reply.usage)
    if failure is not None:
        return _after_failure(
            room, speaker, purpose, reservation, failure, attempt=attempt, first_at=first_at
        )
    fault_point("after_reply")
    return _record(room, speaker, purpose, reservation, reply, queue)


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


def _wait_for_call_slot(
    request_id: int, fence: int, group_id: int, *, attempt: int, waits: int
) -> StepOutcome:
    """Every model-call slot of the owner is in use: say so on the request (once: one
    conditional write the first time) and come back later, the pause growing with each look
    (``slot_backoff``), claiming, projecting and reserving nothing and holding no worker
    thread. The delivery comes back at the same fence; a stale one ends here."""
    metrics.slot_wait("calls")
    steppable = GroupRequest.objects.filter(
        pk=request_id, group_id=group_id, state__in=GroupRequest.STEPPABLE_STATES
    )
    row = steppable.values("fence", "completed_fence", "waiting_for", "updated_at").first()
    waiting_for_tools = row is not None and (
        row["waiting_for"] == GroupRequest.WAITING_FOR_TOOL_SLOT
        and row["updated_at"] > row_locks.tool_wait_cutoff()
    )
    if row is None or not (
        row["fence"] == fence
        or (row["fence"] == fence + 1 and row["completed_fence"] <= fence and not waiting_for_tools)
    ):
        _continue_if_lost(request_id, fence, group_id)
        return StepOutcome.STALE
    if row["waiting_for"] != GroupRequest.WAITING_FOR_CALL_SLOT and steppable.filter(
        fence=row["fence"]
    ).exclude(waiting_for=GroupRequest.WAITING_FOR_CALL_SLOT).update(
        waiting_for=GroupRequest.WAITING_FOR_CALL_SLOT, updated_at=timezone.now()
    ):
        request = GroupRequest.objects.get(pk=request_id)
        events.send_event_on_commit(
            channel=events.group_channel(group_id), event=request_event(request)
        )
    else:
        keep_from_sweeper(request_id, row["fence"], row["updated_at"])
    # Time spent waiting does not count against a retry's window (GARDEN_PROVIDER_RETRY_*):
    # the window starts again when the step runs.
    scheduling.enqueue_step_on_commit(
        request_id,
        fence,
        group_id=group_id,
        attempt=attempt,
        waits=waits + 1,
        countdown=slot_backoff(waits),
    )
    return StepOutcome.WAITING


def _budget_spent(
    room: Room,
    speaker: Agent,
    queue: list[Contribution],
    spent: BudgetSpent,
    *,
    member: bool,
    attempt: int,
) -> StepOutcome:
    """The owner's token budget on the speaker's operator credential is spent (garden/budgets.py),
    and no call is made. This minute's: the request says it waits (once) and the step comes
    back when the minute ends. Today's: the request ends honestly, TOKEN_BUDGET_SPENT (a
    member's contribution is skipped, and the coordinator goes on)."""
    if spent.window == DAY:
        if member:
            return skip_member(room, queue, spent.message.rstrip("."))
        with fenced(room) as w:
            w.finish(
                state=GroupRequest.State.FAILED,
                outcome_code=spent.code,
                outcome=spent.message,
                notice=f"@{speaker.handle} did not run: {spent.message} The request ended.",
            )
        return StepOutcome.TOKEN_BUDGET_SPENT
    with fenced(room) as w:
        request = w.request
        if request.waiting_for != GroupRequest.WAITING_FOR_TOKEN_BUDGET:
            request.waiting_for = GroupRequest.WAITING_FOR_TOKEN_BUDGET
            w.save("waiting_for")
            events.send_event_on_commit(channel=room.channel, event=request_event(request))
        # A little past the minute's end, spread so an owner's waiting steps do not come
        # back together.
        scheduling.enqueue_step_on_commit(
            request.pk,
            room.fence,
            group_id=room.group.pk,
            attempt=attempt,
            countdown=spent.retry_in + slot_backoff(0),
        )
    return StepOutcome.WAITING_FOR_TOKEN_BUDGET


def _stop_waiting(room: Room) -> None:
    """The step has its slot: the request no longer waits (one conditional write, only for a
    request that was waiting)."""
    with fenced(room) as w:
        w.request.waiting_for = ""
        w.save("waiting_for")
        events.send_event_on_commit(channel=room.channel, event=request_event(w.request))


def _record(
    room: Room,
    speaker: Agent,
    purpose: str,
    reservation: CallReservation,
    reply: ChatReply,
    queue: list[Contribution],
) -> StepOutcome:
    is_coordinator = speaker.pk == room.group.coordinator_id and not (
        queue and queue[0].agent == speaker.pk
    )
    content = blocks_to_json(reply.content)
    calls = list(reply.tool_calls) if purpose == CallReservation.Purpose.WORKING else []
    if purpose == CallReservation.Purpose.SYNTHESIS:
        content = [b for b in content if b["type"] == "text"] or [text_block("")]
    head = queue[0] if queue and not is_coordinator else None

    # Which calls wait for a person, decided before any row is locked (an owner's tool may be
    # looked up on its server). Only a tool the agent has can ask: any other is not run.
    waits = {
        c.id
        for c in calls
        if c.name in (speaker.enabled_tools or [])
        and needs_approval(
            name=c.name,
            approval_tools=speaker.approval_tools,
            tool_approvals=speaker.tool_approvals,
            owner_id=room.group.owner_id,
        )
    }
    # Priced before any row is locked: what the call was, to the account it went to then.
    call = price_call(
        account=speaker.model_account,
        input_tokens=reply.usage.input_tokens,
        output_tokens=reply.usage.output_tokens,
    )
    metrics.model_cost(provider=call.provider, model=call.model, usd=call.cost)
    with fenced(room, consume=reservation, call=call) as w:
        content, text = _within_turn_cap(w, speaker, content, reply.text)
        if not calls:
            w.append(
                speaker=speaker,
                content=content,
                reply_to_call_id=(head.call_id or "") if head else "",
            )
            if head is not None:
                return member_finished(w, speaker, queue, text)
            w.finish(
                state=GroupRequest.State.COMPLETED,
                outcome_code="SYNTHESIZED"
                if purpose == CallReservation.Purpose.SYNTHESIS
                else "CONCLUDED",
                outcome=text[:2000],
            )
            return StepOutcome.COMPLETED
        w.append(speaker=speaker, content=content)
        results: list[dict] = []
        pending: list[ToolCall] = []
        team = not room.group.is_solo
        for call in calls:
            if team and is_coordinator and call.name == "group.ask":
                results += ask(w, speaker, call, queue)
            elif team and not is_coordinator and call.name == "group.request_help":
                results += request_help(w, speaker, call, queue)
            else:
                pending.append(call)
        approval_call = next((c for c in pending if c.id in waits), None)
        if approval_call is not None:
            return suspend_for_approval(w, speaker, approval_call, pending, results, queue)
        if results:
            w.append(speaker=speaker, content=results)
        if not pending:
            w.complete(queue)
            return StepOutcome.ASKED if is_coordinator else "helped"
        # The reply is durable before any tool with side effects runs; the step completes
        # only once the results are recorded, so a crash in between is resumed by fence.
        w.request.queue = [c.to_json() for c in queue]
        w.save("queue")
    return run_tools(room, speaker, queue, pending)


def _within_turn_cap(
    w: StepWriter, speaker: Agent, content: list[dict], text: str
) -> tuple[list[dict], str]:
    """The turn's content and text within GARDEN_TURN_MAX_CHARS.

    A reply whose text is longer is kept whole as an artifact of the thread, through the same
    path as a tool's output too large to carry; the turn carries its first characters, a line
    saying what was clipped, and a reference to the artifact, so what the thread pushes,
    caches and copies into an ask's answer stays bounded."""
    limit = settings.GARDEN_TURN_MAX_CHARS
    if len(text) <= limit:
        return content, text
    try:
        artifact = tool_use.keep_as_artifact(
            w,
            speaker,
            None,
            ToolOutcome(text),
            title=f"@{speaker.handle}'s reply ({len(text):,} characters)",
        )
    except QuotaExceeded as refused:
        artifact, where = None, f"not kept ({refused.code})"
    else:
        where = f"kept as artifact {artifact.pk}"
    clipped = (
        f"{text[:limit]}\n[{len(text) - limit:,} more characters clipped: the whole reply is "
        f"{where}.]"
    )
    kept = [text_block(clipped)] + ([artifact_ref_block(artifact)] if artifact else [])
    return kept + [b for b in content if b["type"] != "text"], clipped


def _end_without_summary(w: StepWriter, why: str) -> None:
    w.finish(
        state=GroupRequest.State.FAILED,
        outcome_code="SYNTHESIS_FAILED",
        outcome=f"The summary did not come: {why}.",
        notice=f"The summary did not come ({why}). The contributions above stand under their speakers.",
    )


def _after_failure(
    room: Room,
    speaker: Agent,
    purpose: str,
    reservation: CallReservation,
    exc: ProviderError,
    *,
    attempt: int,
    first_at: float,
) -> StepOutcome:
    """Count the failed call as the seed says, then retry within the ceiling or end honestly.

    A confirmed rejection (or a configuration error: nothing was sent) gives the call back;
    anything ambiguous keeps it (``budget.settle_failed_call``). A retry always reserves again.
    """
    budget.settle_failed_call(reservation=reservation, failure=exc)
    # Asking again would get the same answer: a configuration nothing was sent with, or a
    # server that answered with what cannot be read or with more than the call allows.
    retryable = not isinstance(exc, (ProviderConfigError, MalformedReply, ReplyTooLarge))
    wait = min(getattr(exc, "retry_after", None) or 0.5 * 2 ** (attempt - 1), 30.0)
    within = (
        attempt < settings.GARDEN_PROVIDER_RETRY_ATTEMPTS
        and time.time() + wait - first_at < settings.GARDEN_PROVIDER_RETRY_SECONDS
    )
    if retryable and within:
        with fenced(room):
            # The retry claims this step's fence again; nothing else is written (the fence
            # check alone: a stale step sends no retry).
            scheduling.enqueue_step_on_commit(
                room.request.pk,
                room.fence,
                group_id=room.group.pk,
                attempt=attempt + 1,
                first_at=first_at,
                countdown=wait,
            )
        return StepOutcome.RETRY
    if purpose == CallReservation.Purpose.SYNTHESIS:
        with fenced(room) as w:
            _end_without_summary(w, exc.code)
        return StepOutcome.SYNTHESIS_FAILED
    queue = [Contribution.from_json(c) for c in room.request.queue]
    if queue and queue[0].agent == speaker.pk:
        return skip_member(room, queue, _what_failed(exc, "its"))
    what = _what_failed(exc, f"@{speaker.handle}'s")
    with fenced(room) as w:
        w.finish(
            state=GroupRequest.State.FAILED,
            outcome_code=exc.code,
            outcome=f"{what}.",
            notice=f"{what}; the request ended.",
        )
    return StepOutcome.FAILED


def _what_failed(exc: ProviderError, whose: str) -> str:
    """How a failed call is told in the room: what happened, in the words an account's Test
    uses, and its code."""
    return f"{whose} model call failed ({exc.code}: {exc.words.rstrip('.')})"
