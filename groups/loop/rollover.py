"""Rollover: between completed requests, a room past its character cap is summarised by the
coordinator in one counted maintenance call and continues in a new thread that starts from
that summary. Never mid tool exchange, never with an approval pending."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Sum, TextField
from django.db.models.functions import Cast, Length

from garden import events
from garden.budgets import budget_check, budget_spend
from garden.models import Conversation, Message
from garden.pricing import price_call
from garden.providers import ChatMessage, ChatRequest, ProviderError, TextBlock
from garden.services.conversations import (
    conversation_close,
    conversation_create,
    message_append,
    messages_move,
    text_block,
)
from garden.slots import call_slot
from groups import budget, lock_order
from groups.domain.bounding import RoomTooLarge, bound_for_synthesis
from groups.domain.projection import project
from groups.group_lock import LockContended, group_lock
from groups.loop.room import dispatch, load_room, transcript_turns, views
from groups.models import Approval, CallReservation, GroupRequest
from groups.payloads import conversation_rolled_event
from groups.services.requests import request_start_next

log = logging.getLogger(__name__)

ROLLOVER_INSTRUCTION = (
    "This thread is rolling over because the room is full. Write the summary the next thread "
    "starts from: where the discussion stopped, outstanding questions, decisions pending, and "
    "the ids of relevant artifacts. Start no new work."
)


def room_chars(conversation_id: int) -> int:
    """The room's size as the models see it, measured in the database (content as text)."""
    total = (
        Message.objects.filter(conversation_id=conversation_id)
        .exclude(kind=Message.Kind.ACTIVITY)
        .aggregate(n=Sum(Length(Cast("content", output_field=TextField()))))["n"]
    )
    return int(total or 0)


def request_after_finish(*, request_id: int) -> str:
    """After a completed request: roll the thread over if the room passed its cap, then start
    the group's next queued request (which reads the new thread)."""
    request = (
        GroupRequest.objects.select_related("group", "conversation").filter(pk=request_id).first()
    )
    if request is None:
        return "missing"
    outcome = "not_needed"
    if (
        request.state == GroupRequest.State.COMPLETED
        # An agent's own room is bounded before every call and never rolled over.
        and not request.group.is_solo
        and request.conversation.status == Conversation.Status.OPEN
        and room_chars(request.conversation_id) > request.group.room_cap_chars
    ):
        outcome = rollover(request=request)
    request_start_next(group_id=request.group_id)
    return outcome


def rollover(*, request: GroupRequest) -> str:
    """Summarise and roll the request's thread; caller checked the room is past its cap."""
    group = request.group
    with group_lock(group.pk):
        if (
            GroupRequest.objects.filter(group=group, state__in=GroupRequest.ACTIVE_STATES).exists()
            or Approval.objects.filter(
                request__group=group, status=Approval.Status.PENDING
            ).exists()
        ):
            return "busy"
        room = load_room(request.pk, request.fence)
        coordinator = room.coordinator
        group_view, agent_views = views(room)
        projection = project(
            transcript_turns(room), agent=agent_views[coordinator.pk], group=group_view
        )
        messages = list(projection.messages)
        if messages and messages[-1].role == "user":
            messages[-1] = ChatMessage(
                "user", (*messages[-1].content, TextBlock(ROLLOVER_INSTRUCTION))
            )
        else:
            messages.append(ChatMessage("user", (TextBlock(ROLLOVER_INSTRUCTION),)))
        bounded = bound_for_synthesis(
            type(projection)(system=projection.system, messages=tuple(messages)),
            group.room_cap_chars,
        )
        if isinstance(bounded, RoomTooLarge):
            _tell_owner(request, f"The thread did not roll over: {bounded.reason}")
            return "room_too_large"
        spent = budget_check(owner_id=group.owner_id, account=coordinator.model_account)
        if spent is not None:
            # The owner's token budget on the coordinator's operator credential is spent:
            # the thread stays as it is; the next completed request tries again.
            _tell_owner(request, f"The thread did not roll over: {spent.message}")
            return "token_budget_spent"
        with call_slot(owner_id=group.owner_id) as free:
            if not free:
                # Every model-call slot of the owner is in use: the task tries again shortly.
                raise LockContended(f"call slots of owner {group.owner_id}")
            reservation = budget.reserve_call(
                request_id=request.pk,
                purpose=CallReservation.Purpose.MAINTENANCE,
                agent_id=coordinator.pk,
                fence=None,
            )
            if reservation is None:
                return "maintenance_spent"
            try:
                reply, failure = (
                    dispatch(
                        coordinator,
                        ChatRequest(system=bounded.system, messages=bounded.messages),
                        purpose=CallReservation.Purpose.MAINTENANCE,
                    ),
                    None,
                )
            except ProviderError as exc:
                reply, failure = None, exc
        if failure is None:
            budget_spend(
                owner_id=group.owner_id, account=coordinator.model_account, usage=reply.usage
            )
        if failure is not None:
            budget.settle_failed_call(reservation=reservation, failure=failure)
            _tell_owner(
                request,
                f"The thread did not roll over: the summary did not come "
                f"({failure.code}). The conversation continues as it is.",
            )
            return "summary_failed"
        # The summary call is the request's too: recorded on its reservation, and its tokens
        # and cost added to the request's, in a transaction of its own (it locks the request
        # row, which the roll below may take only after the group's).
        call = price_call(
            account=coordinator.model_account,
            input_tokens=reply.usage.input_tokens,
            output_tokens=reply.usage.output_tokens,
        )
        summary = reply.text.strip()
        if not summary:
            budget.consume_call(reservation=reservation, reason="empty summary", call=call)
            _tell_owner(request, "The thread did not roll over: the summary came back empty.")
            return "summary_empty"
        budget.consume_call(reservation=reservation, call=call)
        with transaction.atomic():
            _roll(request, coordinator, summary)
    return "rolled"


def _roll(request: GroupRequest, coordinator, summary: str) -> Conversation:
    """Close the old thread, open the new one from the summary, and move the owner messages
    still waiting in the queue into it, so they are answered where they will be read."""
    group = lock_order.lock_group(request.group_id)
    queued = lock_order.lock_group_requests(group.pk, states=[GroupRequest.State.QUEUED])
    old = lock_order.lock_conversation(request.conversation_id)
    channel = events.group_channel(group.pk)
    message_append(
        conversation_id=old.pk,
        speaker_kind=Message.SpeakerKind.GARDEN,
        kind=Message.Kind.NOTICE,
        content=[
            text_block(
                "This thread rolled over: the room reached its size. The "
                "discussion continues in a new thread that starts from a summary."
            )
        ],
        request_id=request.pk,
        channel=channel,
    )
    conversation_close(conversation=old)
    new = conversation_create(
        owner=group.owner, group=group, title=group.name, carried_summary=summary
    )
    message_append(
        conversation_id=new.pk,
        speaker_kind=Message.SpeakerKind.AGENT,
        speaker_agent=coordinator,
        kind=Message.Kind.SUMMARY,
        content=[text_block(summary)],
        channel=channel,
    )
    for waiting in queued:
        if waiting.conversation_id != old.pk:
            continue
        waiting.conversation = new
        waiting.save(update_fields=["conversation", "updated_at"])
        messages_move(request_id=waiting.pk, from_conversation_id=old.pk, to_conversation_id=new.pk)
    events.send_event_on_commit(
        channel=channel, event=conversation_rolled_event(old=old.pk, new=new.pk)
    )
    return new


def _tell_owner(request: GroupRequest, text: str) -> None:
    message_append(
        conversation_id=request.conversation_id,
        speaker_kind=Message.SpeakerKind.GARDEN,
        kind=Message.Kind.NOTICE,
        content=[text_block(text)],
        request_id=request.pk,
        channel=events.group_channel(request.group_id),
    )
