"""The sweep of stranded requests: a crash may lose a step's continuation, a worker may die
mid-step, a queued request may wait behind nothing, and a 1:1 turn sent before 1:1 messages ran
on the group loop may have no request. Each is put back on its way, by fence."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from garden import events, telemetry
from garden.models import Message
from garden.services.conversations import message_append, text_block
from groups import lock_order, scheduling
from groups.models import GroupRequest
from groups.payloads import request_event
from groups.services.requests import request_start_next, solo_room_for


def request_for_unanswered_turn(*, message_id: int) -> GroupRequest | None:
    """An owner turn of a 1:1 conversation from before its messages ran on the group loop
    (no request, no reply) becomes a queued request of its agent's room, so no message sent
    then is left unanswered. Idempotent: a turn with a request or a reply is left alone;
    None then, or when the agent cannot run (the turn gets a notice saying so)."""
    turn = (
        Message.objects.select_related("conversation__agent")
        .filter(pk=message_id, speaker_kind=Message.SpeakerKind.OWNER, request__isnull=True)
        .exclude(conversation__agent__isnull=True)
        .first()
    )
    if turn is None or Message.objects.filter(in_reply_to=turn).exists():
        return None
    room = solo_room_for(agent_id=turn.conversation.agent_id)
    with transaction.atomic():
        locked = lock_order.lock_group(room.pk)
        # Under the room's lock: a second delivery finds the request the first one made.
        if (
            not Message.objects.filter(pk=turn.pk, request__isnull=True).exists()
            or Message.objects.filter(in_reply_to=turn).exists()
        ):
            return None
        agent = turn.conversation.agent
        if not agent.can_run:
            message_append(
                conversation_id=turn.conversation_id,
                speaker_kind=Message.SpeakerKind.GARDEN,
                kind=Message.Kind.NOTICE,
                content=[text_block(f"The reply did not come: @{agent.handle} cannot run now.")],
                in_reply_to=turn,
            )
            return None
        traced = telemetry.request_started(group_id=locked.pk)
        request = GroupRequest.objects.create(
            group=locked,
            conversation_id=turn.conversation_id,
            message=turn,
            trace_context=traced.traceparent,
        )
        traced.accepted(request_id=request.pk)
        Message.objects.filter(pk=turn.pk).update(request=request)
        events.send_event_on_commit(
            channel=events.group_channel(locked.pk), event=request_event(request)
        )
        scheduling.start_next_on_commit(locked.pk)
    return request


def unanswered_turns(*, older_than: timedelta) -> list[int]:
    """The ids of 1:1 owner turns with neither a request nor a reply, older than the given
    age (sent before 1:1 messages ran on the group loop): ``request_sweep`` queues them."""
    return list(
        Message.objects.filter(
            speaker_kind=Message.SpeakerKind.OWNER,
            conversation__agent__isnull=False,
            request__isnull=True,
            replies__isnull=True,
            created_at__lte=timezone.now() - older_than,
        ).values_list("pk", flat=True)[:500]
    )


def request_sweep(*, older_than_seconds: float | None = None) -> dict[str, int]:
    """Find requests a crash may have stranded and put them back on their way, by fence.

    - steppable, last step completed, no continuation ran since: the enqueue after commit was
      lost — enqueue the step for the current fence;
    - steppable, a step claimed but never completed: its worker died (or is still running,
      in which case the swept step waits on the group lock and then finds itself stale) —
      enqueue the step for the fence below, which claims again one higher;
    - queued behind nothing: start it;
    - a 1:1 owner turn with neither request nor reply (sent before 1:1 messages ran on the
      group loop): queue a request for it (``request_for_unanswered_turn``).
    Only requests untouched for ``older_than_seconds`` (default GARDEN_SWEEP_AFTER_SECONDS,
    longer than a step's hard time limit) are considered, so live work is left alone.
    """
    age = settings.GARDEN_SWEEP_AFTER_SECONDS if older_than_seconds is None else older_than_seconds
    cutoff = timezone.now() - timedelta(seconds=age)
    found = {"continued": 0, "reclaimed": 0, "started": 0, "answered": 0}
    for row in GroupRequest.objects.filter(
        state__in=GroupRequest.STEPPABLE_STATES, updated_at__lte=cutoff
    ).values("pk", "fence", "completed_fence", "group_id", "trace_context"):
        action = "continued" if row["completed_fence"] >= row["fence"] else "reclaimed"
        # The recovery in the request's trace: the step it sends runs there too.
        telemetry.mark(
            "garden.sweep.recover",
            trace_context=row["trace_context"],
            attributes={
                "garden.request.id": row["pk"],
                "garden.step.fence": row["fence"],
                "garden.sweep.action": action,
            },
        )
        if action == "continued":
            scheduling.enqueue_step(row["pk"], row["fence"], group_id=row["group_id"])
        else:
            scheduling.enqueue_step(row["pk"], row["fence"] - 1, group_id=row["group_id"])
        found[action] += 1
    found["started"] = _start_idle_queues(created_at__lte=cutoff)
    for message_id in unanswered_turns(older_than=timedelta(seconds=age)):
        if request_for_unanswered_turn(message_id=message_id):
            found["answered"] += 1
    return found


def requests_resend_lost() -> dict[str, int]:
    """After Redis lost what it held (``garden.lost_sends.work_lost``): the next step of every
    steppable request whose last step completed (its queued task may be gone), and the first of
    every idle group's queue, whatever their age. A step claimed but not completed is left to
    its worker, alive or swept as ever. Sending a step twice is safe: the second finds its fence
    passed."""
    found = {"continued": 0, "started": 0}
    for row in GroupRequest.objects.filter(
        state__in=GroupRequest.STEPPABLE_STATES, completed_fence__gte=F("fence")
    ).values("pk", "fence", "group_id"):
        scheduling.enqueue_step(row["pk"], row["fence"], group_id=row["group_id"])
        found["continued"] += 1
    found["started"] = _start_idle_queues()
    return found


def _start_idle_queues(**queued: object) -> int:
    """Start the first queued request (of those matching ``queued``) of every group running
    none; how many started."""
    idle_groups = (
        GroupRequest.objects.filter(state=GroupRequest.State.QUEUED, **queued)
        .exclude(group__requests__state__in=GroupRequest.ACTIVE_STATES)
        .values_list("group_id", flat=True)
        .distinct()
    )
    return sum(1 for group_id in idle_groups if request_start_next(group_id=group_id))
