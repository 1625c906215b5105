"""The tools of a member's reply: offered by name, run outside any transaction under one
time budget and a cap on their number, output too large to carry kept as an artifact, and a
call that needs approval suspending the whole request until a person decides."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from garden import egress, events, metrics, telemetry
from garden.errors import QuotaExceeded
from garden.models import Agent, Artifact, Message
from garden.providers import ToolCall, ToolResult, ToolSpec
from garden.services.attachments import artifact_ref_block
from garden.services.conversations import text_block
from garden.slots import TOOLS, HeldSlot, slot_backoff, slot_hold
from garden.storage import storage_check
from garden.tools import (
    ToolOutcome,
    describe_action,
    get_tool,
    get_tools,
    is_sourced,
    run_tool,
)
from garden.transcript import block_to_json
from groups import scheduling
from groups.domain.outcomes import StepOutcome
from groups.domain.routing import Contribution
from groups.group_tools import oversized_limit, tool_context
from groups.loop.asks import answer_ask, synthesis_begins, tool_error
from groups.loop.fencing import StepWriter, fenced
from groups.loop.room import Room, load_room, release_connection
from groups.models import Approval, GroupRequest
from groups.payloads import approval_event
from groups.services.webhook_deliveries import webhook_deliveries_for_approval
from groups.signals import approvals_changed_on_commit

COORDINATOR_TOOLS = ("group.ask",)
MEMBER_TOOLS = ("group.request_help",)


def tool_specs(room: Room, speaker: Agent) -> tuple[ToolSpec, ...]:
    if room.group.is_solo:
        names = []  # one agent and its owner: no one to ask, no one to hand back to
    elif speaker.pk == room.group.coordinator_id:
        names = list(COORDINATOR_TOOLS)
    else:
        names = list(MEMBER_TOOLS)
    names += [n for n in speaker.enabled_tools if n not in names]
    found = get_tools(names, owner_id=room.group.owner_id)
    return tuple(found[name].spec for name in names if name in found)


def run_tools(
    room: Room,
    speaker: Agent,
    queue: list[Contribution],
    pending: list[ToolCall],
    *,
    slot: HeldSlot | None = None,
    waits: int = 0,
) -> StepOutcome:
    """Run the reply's tool calls outside any transaction, then record their results and
    complete the step (or stop the member's run on output too large to carry).

    They run holding one of the owner's tool slots (``slot``, or one taken here): with none
    free, the step waits for one without holding a worker thread (``_wait_for_tool_slot``)
    and a later delivery runs them (``resume_tools``)."""
    slot = slot or slot_hold(owner_id=room.group.owner_id, kind=TOOLS)
    if slot is None:
        return _wait_for_tool_slot(room, waits=waits)
    release_connection()
    # One time budget for all of a reply's tools (what they fetch shares one deadline), and a
    # cap on how many run: a model the owner points anywhere cannot keep the step alive.
    most = settings.GARDEN_MAX_TOOL_CALLS_PER_REPLY
    too_many = ToolOutcome(
        f"NOT_RUN: at most {most} tool calls run per reply.", is_error=True, code="NOT_RUN"
    )
    with slot, egress.deadline(settings.GARDEN_TOOLS_SECONDS_PER_STEP):
        outcomes = [
            (call, _run_tool(room, speaker, call) if i < most else too_many)
            for i, call in enumerate(pending)
        ]
    limit = oversized_limit(room.group.room_cap_chars)
    with fenced(room) as w:
        if w.request.waiting_for:
            w.request.waiting_for = ""
            w.save("waiting_for")
        blocks: list[dict] = []
        too_large: list[tuple[ToolCall, int, int]] = []
        for call, out in outcomes:
            artifact = None
            if len(out.content) > limit:
                try:
                    artifact = keep_as_artifact(w, speaker, call, out)
                except QuotaExceeded as refused:
                    out = ToolOutcome(
                        f"{refused.code}: {len(out.content):,} characters, too large to carry "
                        f"and not kept: {refused.message}",
                        is_error=True,
                        code=refused.code,
                    )
            if artifact is not None:
                too_large.append((call, len(out.content), artifact.pk))
                blocks.append(
                    block_to_json(
                        ToolResult(
                            call_id=call.id,
                            content=f"TOO_LARGE_TO_CARRY: {len(out.content)} characters; kept "
                            f"as artifact {artifact.pk} ({artifact.title}).",
                            is_error=True,
                        )
                    )
                )
                blocks.append(artifact_ref_block(artifact))
            else:
                blocks.append(
                    block_to_json(
                        ToolResult(call_id=call.id, content=out.content, is_error=out.is_error)
                    )
                )
        w.append(speaker=speaker, content=blocks)
        if too_large:
            return _controlled_stop(w, speaker, queue, too_large)
        w.complete(queue)
    return StepOutcome.TOOLS


def _wait_for_tool_slot(room: Room, *, waits: int) -> StepOutcome:
    """Every tool slot of the owner is in use: the reply stays recorded, the request says what
    it waits for (once), and this step's tools run when a later delivery finds a free slot
    (the same fence: nothing else may step the request meanwhile)."""
    metrics.slot_wait("tools")
    with fenced(room) as w:
        w.wait_for(GroupRequest.WAITING_FOR_TOOL_SLOT)
        request = w.request
        _come_back_for_tools(request.pk, room.fence, room.group.pk, waits=waits)
    return StepOutcome.WAITING_FOR_TOOLS


def keep_from_sweeper(request_id: int, fence: int, updated_at: datetime) -> None:
    """A request that has waited for a slot for half the sweeper's delay (``updated_at``, as
    the waiting step read it) is touched — one conditional write then, none on the other
    looks — so the sweeper never takes the waiting step for a lost one and sends another."""
    now = timezone.now()
    if updated_at < now - timedelta(seconds=settings.GARDEN_SWEEP_AFTER_SECONDS / 2):
        GroupRequest.objects.filter(pk=request_id, fence=fence, updated_at=updated_at).update(
            updated_at=now
        )


def _come_back_for_tools(request_id: int, fence: int, group_id: int, *, waits: int) -> None:
    scheduling.enqueue_step_on_commit(
        request_id,
        fence,
        group_id=group_id,
        waits=waits + 1,
        tools=True,
        countdown=slot_backoff(waits),
    )


def resume_tools(*, request_id: int, fence: int, group_id: int, waits: int) -> StepOutcome:
    """Run the tools of the step that claimed ``fence`` and waited for a tool slot, once one
    is free; with none yet, come back later having written nothing. Caller holds the group's
    lock. Stale (the step's fence moved: a stop, an ending) does nothing."""
    row = (
        GroupRequest.objects.filter(
            pk=request_id,
            group_id=group_id,
            fence=fence,
            completed_fence__lt=fence,
            state__in=GroupRequest.STEPPABLE_STATES,
        )
        .values_list("group__owner_id", "updated_at")
        .first()
    )
    if row is None:
        return StepOutcome.STALE
    slot = slot_hold(owner_id=row[0], kind=TOOLS)
    if slot is None:
        keep_from_sweeper(request_id, fence, row[1])
        _come_back_for_tools(request_id, fence, group_id, waits=waits)
        return StepOutcome.WAITING_FOR_TOOLS
    with slot:
        room = load_room(request_id, fence)
        speaker_id, pending = _unanswered_calls(request_id, fence)
        speaker = room.members.get(speaker_id) if speaker_id else None
        queue = [Contribution.from_json(c) for c in room.request.queue]
        if speaker is None and pending:
            # Its agent left the group while the tools waited: the calls are answered, not run,
            # so none is left without a result.
            with fenced(room) as w:
                w.append(
                    speaker=Agent.objects.filter(pk=speaker_id).first(),
                    content=[
                        block_to_json(
                            ToolResult(
                                call_id=call.id,
                                content="NOT_RUN: the agent left the group before its tools ran.",
                                is_error=True,
                            )
                        )
                        for call in pending
                    ],
                )
                w.complete(queue, waiting_for="")
            return StepOutcome.TOOLS
        if not pending:
            with fenced(room) as w:
                w.complete(queue, waiting_for="")
            return StepOutcome.TOOLS
        return run_tools(room, speaker, queue, pending, slot=slot)


def _unanswered_calls(request_id: int, fence: int) -> tuple[int | None, list[ToolCall]]:
    """The speaker of the step at ``fence`` and the calls of its reply that have no result
    yet (the loop answers its own, such as group.ask, before the tools wait)."""
    speaker_id: int | None = None
    calls: list[ToolCall] = []
    answered: set[str] = set()
    rows = (
        Message.objects.filter(request_id=request_id, step=fence)
        .order_by("seq")
        .values_list("speaker_agent_id", "content")
    )
    for agent_id, content in rows:
        for block in content:
            if block.get("type") == "tool_call":
                speaker_id = agent_id
                calls.append(
                    ToolCall(id=block["id"], name=block["name"], arguments=block["arguments"])
                )
            elif block.get("type") == "tool_result":
                answered.add(block["call_id"])
    return speaker_id, [c for c in calls if c.id not in answered]


def keep_as_artifact(
    w: StepWriter, speaker: Agent, call: ToolCall | None, out: ToolOutcome, *, title: str = ""
) -> Artifact:
    """Keep ``out`` as a document of the thread, in the step's fenced transaction;
    QuotaExceeded (STORAGE_FULL), writing nothing, when it would pass the owner's storage.
    The step's turns take the thread's row after this, so the owner's lock cannot be taken
    here: the check is unserialised (garden/storage.py storage_check)."""
    w.checked()
    room = w.room
    size = len(out.content.encode())
    storage_check(owner_id=room.group.owner_id, adding=size)
    return Artifact.objects.create(
        owner_id=room.group.owner_id,
        agent=speaker,
        conversation_id=room.request.conversation_id,
        kind="document",
        title=title or f"{call.name} output ({len(out.content):,} characters)",
        mime_type="text/plain",
        content=out.content,
        size=size,
    )


def _controlled_stop(
    w: StepWriter,
    speaker: Agent,
    queue: list[Contribution],
    too_large: list[tuple[ToolCall, int, int]],
) -> StepOutcome:
    """End the member's run on output too large to carry: the output is an artifact now, the
    coordinator is told, and the request moves to synthesis over a bounded room."""
    sizes = ", ".join(
        f"{call.name}: {n:,} characters (artifact {aid})" for call, n, aid in too_large
    )
    if queue and queue[0].agent == speaker.pk and queue[0].call_id:
        answer_ask(
            w,
            queue[0],
            f"@{speaker.handle}'s run ended: its tool output was too large to "
            f"carry ({sizes}); it is kept as an artifact.",
            is_error=True,
        )
        queue.pop(0)
    w.request.queue = [c.to_json() for c in queue]
    return synthesis_begins(
        w,
        f"@{speaker.handle}'s tool output was too large to carry ({sizes}); "
        f"it is kept as an artifact and referenced above.",
    )


def _run_tool(room: Room, speaker: Agent, call: ToolCall) -> ToolOutcome:
    with telemetry.tool_call(name=call.name, call_id=call.id, arguments=call.arguments) as span:
        return span.done(_tool_outcome(room, speaker, call))


def _tool_outcome(room: Room, speaker: Agent, call: ToolCall) -> ToolOutcome:
    tool = get_tool(call.name, owner_id=room.group.owner_id)
    if tool is None or tool.loop_handled or call.name not in (speaker.enabled_tools or []):
        return ToolOutcome(
            f"TOOL_NOT_AVAILABLE: @{speaker.handle} has no tool {call.name!r} here.",
            is_error=True,
            code="TOOL_NOT_AVAILABLE",
        )
    ctx = tool_context(request=room.request, group=room.group, agent_id=speaker.pk)
    started = time.monotonic()
    out = run_tool(ctx, call.name, call.arguments)
    metrics.tool_call(
        source=_source(call.name),
        outcome="error" if out.is_error else "ok",
        seconds=time.monotonic() - started,
    )
    return out


def _source(name: str) -> str:
    """Where a tool comes from, as the metrics label it: an owner's MCP server or built in."""
    return "mcp" if is_sourced(name) else "builtin"


def suspend_for_approval(
    w: StepWriter,
    speaker: Agent,
    call: ToolCall,
    pending: list[ToolCall],
    results: list[dict],
    queue: list[Contribution],
) -> StepOutcome:
    """A tool call that needs approval suspends the whole request until a person decides.

    ``pending`` is every call of the reply: the others — the asks and requests for help the
    loop would have scheduled among them — are answered as not run, so nothing else in this
    turn runs, before or after the decision; the approved action itself runs exactly once
    later. A member's pause ends the
    coordinator's turn too: the other asks of that turn waiting behind the member are
    answered as not run and leave the queue, so once the member is done the coordinator
    speaks next (and asks again if it still wants them).
    """
    w.checked()
    room = w.room
    for other in pending:
        if other.id != call.id:
            results.append(
                tool_error(other, "NOT_RUN", "not run: another action in this turn awaits approval")
            )
    if results:
        w.append(speaker=speaker, content=results)
    if queue and queue[0].agent == speaker.pk and queue[0].source == "ask":
        asked_by = queue[0].asked_by
        for other in [c for c in queue[1:] if c.source == "ask" and c.asked_by == asked_by]:
            answer_ask(
                w,
                other,
                "NOT_RUN: not asked — the turn paused for an approval; ask again if it is "
                "still needed.",
                is_error=True,
            )
            queue.remove(other)
    approval = Approval.objects.create(
        owner_id=room.group.owner_id,
        group=room.group,
        request=room.request,
        conversation_id=room.request.conversation_id,
        agent=speaker,
        tool_call_id=call.id,
        action={"name": call.name, "arguments": call.arguments},
    )
    w.append(
        speaker=speaker,
        kind=Message.Kind.ACTIVITY,
        content=[
            text_block(
                f"{speaker.name} wants to {describe_action(call.name, call.arguments)}; "
                "waiting for your approval."
            )
        ],
    )
    w.flush()
    telemetry.event(
        "garden.approval.requested",
        {
            "garden.approval.id": approval.pk,
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
        },
    )
    events.send_event_on_commit(channel=room.channel, event=approval_event(approval))
    approvals_changed_on_commit([approval.pk])
    transaction.on_commit(lambda: metrics.approval_created(_source(call.name)))
    webhook_deliveries_for_approval(approval=approval)
    w.complete(queue, state=GroupRequest.State.AWAITING_APPROVAL)
    return StepOutcome.AWAITING_APPROVAL
