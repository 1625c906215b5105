"""When a step cannot make its call now: every model-call slot of the owner is in use, or the
owner's token budget is spent. The request says it waits (once), nothing is claimed or
reserved, and the step comes back later at the same fence."""

from __future__ import annotations

from django.utils import timezone

from garden import events, metrics
from garden.budgets import DAY, BudgetSpent
from garden.models import Agent
from garden.slots import slot_backoff
from groups import lock_order, scheduling
from groups.domain.outcomes import StepOutcome
from groups.domain.routing import Contribution
from groups.loop.asks import skip_member
from groups.loop.claim import continue_if_lost
from groups.loop.fencing import fenced
from groups.loop.room import Room
from groups.loop.tool_calls import keep_from_sweeper
from groups.models import GroupRequest
from groups.payloads import request_event


def wait_for_call_slot(
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
        and row["updated_at"] > lock_order.tool_wait_cutoff()
    )
    if row is None or not (
        row["fence"] == fence
        or (row["fence"] == fence + 1 and row["completed_fence"] <= fence and not waiting_for_tools)
    ):
        continue_if_lost(request_id, fence, group_id)
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


def token_budget_spent(
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
        w.wait_for(GroupRequest.WAITING_FOR_TOKEN_BUDGET)
        request = w.request
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


def stop_waiting(room: Room) -> None:
    """The step has its slot: the request no longer waits (one conditional write, only for a
    request that was waiting)."""
    with fenced(room) as w:
        w.request.waiting_for = ""
        w.save("waiting_for")
        events.send_event_on_commit(channel=room.channel, event=request_event(w.request))
