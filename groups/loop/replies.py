"""Recording a reply: its turn under the speaker (within the turn cap, the rest kept as an
artifact), then what it asks for — the end of the request, a member's answer, asks, help, a
tool call that waits for approval, or the tools to run — all under the step's fence."""

from __future__ import annotations

from django.conf import settings

from garden import metrics
from garden.errors import QuotaExceeded
from garden.models import Agent
from garden.pricing import price_call
from garden.providers import ChatReply, ToolCall, ToolResult
from garden.services.attachments import artifact_ref_block
from garden.services.conversations import text_block
from garden.tools import ToolOutcome, call_refusal, get_tool, needs_approval
from garden.transcript import block_to_json, blocks_to_json
from groups.domain.outcomes import StepOutcome
from groups.domain.routing import Contribution
from groups.loop import tool_calls
from groups.loop.asks import ask, member_finished, request_help
from groups.loop.fencing import StepWriter, fenced
from groups.loop.room import Room
from groups.loop.tool_calls import run_tools, suspend_for_approval
from groups.models import CallReservation, GroupRequest


def record_reply(
    room: Room,
    speaker: Agent,
    purpose: str,
    reservation: CallReservation,
    reply: ChatReply,
    queue: list[Contribution],
) -> StepOutcome:
    """Record ``reply`` under ``speaker`` and carry out what it asks for, consuming
    ``reservation`` in the same fenced write."""
    is_coordinator = speaker.pk == room.group.coordinator_id and not (
        queue and queue[0].agent == speaker.pk
    )
    content = blocks_to_json(reply.content)
    calls = list(reply.tool_calls) if purpose == CallReservation.Purpose.WORKING else []
    if purpose == CallReservation.Purpose.SYNTHESIS:
        content = [b for b in content if b["type"] == "text"] or [text_block("")]
    head = queue[0] if queue and not is_coordinator else None

    team = not room.group.is_solo

    def loop_handled(call: ToolCall) -> bool:
        if is_coordinator:
            return team and call.name == "group.ask"
        return team and call.name == "group.request_help"

    # Which call waits for a person, decided before any row is locked (an owner's tool may be
    # looked up on its server); and the refusals of the calls that would wait but can never
    # run, which are answered at once instead of being offered.
    waiting, refused = _offers(
        [c for c in calls if not loop_handled(c)], speaker, owner_id=room.group.owner_id
    )
    # Priced before any row is locked: what the call was, to the account it went to then.
    call = price_call(
        account=speaker.model_account,
        input_tokens=reply.usage.input_tokens,
        output_tokens=reply.usage.output_tokens,
    )
    metrics.model_cost(provider=call.provider, model=call.model, usd=call.cost)
    # The steady shapes — a member's answer, the coordinator's asks — write only turns and
    # the request's row: the whole write, its re-check included, is then one statement.
    steady = len(reply.text) <= settings.GARDEN_TURN_MAX_CHARS and (
        (not calls and head is not None)
        or (
            calls
            and is_coordinator
            and not room.group.is_solo
            and waiting is None
            and all(c.name == "group.ask" for c in calls)
        )
    )
    with fenced(room, consume=reservation, call=call, at_once=bool(steady)) as w:
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
        # A call that waits ends the turn: nothing else the reply asked for runs, not even
        # the asks and the help the loop itself would have scheduled.
        if waiting is not None:
            return suspend_for_approval(w, speaker, waiting, calls, [], queue)
        results: list[dict] = []
        pending: list[ToolCall] = []
        for call in calls:
            if call.id in refused:
                out = refused[call.id]
                results.append(
                    block_to_json(
                        ToolResult(call_id=call.id, content=out.content, is_error=out.is_error)
                    )
                )
            elif not loop_handled(call):
                pending.append(call)
            elif is_coordinator:
                results += ask(w, speaker, call, queue)
            else:
                results += request_help(w, speaker, call, queue)
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


def _offers(
    calls: list[ToolCall], speaker: Agent, *, owner_id: int
) -> tuple[ToolCall | None, dict[str, ToolOutcome]]:
    """The first of ``calls`` that waits for a person's approval (None when none does), and
    the refusals of those before it that would wait but can never run — arguments outside the
    tool's schema or its own check, or a tool not there — by call id: never offered, answered
    at once. Only a tool the agent has can ask (any other is not run); at most
    GARDEN_MAX_TOOL_CALLS_PER_REPLY are checked, and the ones past them are not run."""
    most = settings.GARDEN_MAX_TOOL_CALLS_PER_REPLY
    refused: dict[str, ToolOutcome] = {}
    for call in calls:
        if call.name not in (speaker.enabled_tools or []) or not needs_approval(
            name=call.name,
            approval_tools=speaker.approval_tools,
            tool_approvals=speaker.tool_approvals,
            owner_id=owner_id,
        ):
            continue
        if len(refused) >= most:
            refused[call.id] = ToolOutcome(
                f"NOT_RUN: at most {most} tool calls run per reply.", is_error=True, code="NOT_RUN"
            )
            continue
        tool = get_tool(call.name, owner_id=owner_id)
        refusal = (
            ToolOutcome(
                f"TOOL_NOT_AVAILABLE: {call.name!r}", is_error=True, code="TOOL_NOT_AVAILABLE"
            )
            if tool is None
            else call_refusal(tool, call.arguments)
        )
        if refusal is None:
            return call, refused
        refused[call.id] = refusal
    return None, refused


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
        artifact = tool_calls.keep_as_artifact(
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
