"""Writes for group requests: create from an owner message, stop, and the state changes of
the coordinator loop. Lock order everywhere: group row before request row; an owner's quota
lock (garden/quotas.py), when taken, last."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from garden import events, telemetry
from garden.attachments import Upload, attachments_check
from garden.errors import QuotaExceeded, ServiceError, is_row_id
from garden.models import Agent, Approval, Conversation, Message
from garden.quotas import quota_hold
from garden.retry import retry_on_lock_conflict
from garden.services.attachments import (
    artifact_ref_block,
    attachment_bytes_hold,
    attachment_store,
)
from garden.services.conversations import conversation_create, message_append, text_block
from garden.storage import storage_hold
from groups import row_locks, scheduling
from groups.models import Group, GroupRequest
from groups.payloads import approval_event, request_event
from groups.routing import Contribution, parse_mentions
from groups.services.webhooks import webhook_deliveries_for_request, webhook_named_check
from groups.signals import approvals_changed_on_commit, request_finished


def request_finish(
    *,
    request: GroupRequest,
    state: str,
    outcome_code: str = "",
    outcome: str = "",
    notice: str = "",
) -> GroupRequest:
    """End ``request`` honestly: final state, outcome, fence bumped, pending approvals rejected.

    Caller holds FOR UPDATE on the group row and then the request row. Bumping the fence
    invalidates every pending continuation, so a late step or a late approval cannot write.
    The next queued request of the group is started after commit.
    """
    assert state in GroupRequest.FINISHED_STATES
    now = timezone.now()
    GroupRequest.objects.filter(pk=request.pk).update(
        state=state,
        outcome_code=outcome_code,
        outcome=outcome,
        fence=F("fence") + 1,
        finished_at=now,
        queue=[],
        waiting_for="",
        updated_at=now,
    )
    request.refresh_from_db()
    channel = events.group_channel(request.group_id)
    rejected = []
    for approval in row_locks.lock_pending_approvals(request.pk):
        approval.status = Approval.Status.REJECTED
        approval.reason = f"request {state}"
        approval.decided_at = now
        approval.save(update_fields=["status", "reason", "decided_at"])
        events.send_event_on_commit(channel=channel, event=approval_event(approval))
        rejected.append(approval.pk)
    approvals_changed_on_commit(rejected)
    if notice:
        message_append(
            conversation_id=request.conversation_id,
            speaker_kind=Message.SpeakerKind.GARDEN,
            kind=Message.Kind.NOTICE,
            content=[text_block(notice)],
            request_id=request.pk,
            channel=channel,
        )
    events.send_event_on_commit(channel=channel, event=request_event(request))
    # Every ending passes here: its webhooks exist exactly when it commits.
    webhook_deliveries_for_request(request=request)
    group_id, request_id, code = request.group_id, request.pk, request.outcome_code
    if state == GroupRequest.State.COMPLETED:
        # Between completed requests the thread may roll over before the next one starts.
        scheduling.after_request_on_commit(request_id)
    else:
        scheduling.start_next_on_commit(group_id)
    transaction.on_commit(
        lambda: request_finished.send(
            sender=GroupRequest, request_id=request_id, state=state, outcome_code=code
        )
    )
    return request


@retry_on_lock_conflict
def request_stop_active(
    *,
    group: Group,
    reason: str = "Stopped by the owner.",
    include_queued: bool = False,
    conversation_id: int | None = None,
) -> GroupRequest | None:
    """Stop the group's active request, rejecting its pending approval.

    Effects already completed stay completed. ``include_queued`` also stops the requests
    waiting behind it (clear and delete do). ``conversation_id`` stops only that thread's
    (an agent's 1:1 conversation, whose room the agent's other conversations share).
    Returns the stopped active request, if any.
    """
    states = [*GroupRequest.ACTIVE_STATES]
    if include_queued:
        states.append(GroupRequest.State.QUEUED)
    with transaction.atomic():
        row_locks.lock_group(group.pk)
        active = None
        for request in row_locks.lock_group_requests(group.pk, states=states):
            if conversation_id is not None and request.conversation_id != conversation_id:
                continue
            was_active = request.state in GroupRequest.ACTIVE_STATES
            request_finish(
                request=request,
                state=GroupRequest.State.STOPPED,
                outcome_code="STOPPED",
                outcome=reason,
                notice=reason if was_active else "",
            )
            if was_active:
                active = request
    return active


@retry_on_lock_conflict
def request_cancel(
    *, group: Group, request_id: int, conversation_id: int | None = None
) -> GroupRequest:
    """Cancel a queued request of ``group`` before it starts: it ends ``stopped`` (code
    CANCELLED) and its message stays in the thread. 404 for no such request of the group,
    409 NOT_QUEUED for one that has started or ended (Stop ends a started one)."""
    with transaction.atomic():
        row_locks.lock_group(group.pk)
        request = row_locks.lock_request(request_id) if is_row_id(request_id) else None
        if (
            request is None
            or request.group_id != group.pk
            or (conversation_id is not None and request.conversation_id != conversation_id)
        ):
            raise ServiceError("NOT_FOUND", "No such request.", status=404)
        if request.state != GroupRequest.State.QUEUED:
            raise ServiceError(
                "NOT_QUEUED",
                "This request is not waiting to start: Stop ends one that has started.",
                status=409,
            )
        request_finish(
            request=request,
            state=GroupRequest.State.STOPPED,
            outcome_code="CANCELLED",
            outcome="Cancelled by the owner before it started.",
        )
    return request


def group_conversation_open(*, group: Group):
    """The group's open thread; created on first use. Caller holds FOR UPDATE on the group."""
    conversation = (
        group.conversations.filter(status=Conversation.Status.OPEN).order_by("-id").first()
    )
    if conversation is None:
        conversation = conversation_create(owner=group.owner, group=group, title=group.name)
    return conversation


def check_queue_room(*, group: Group) -> None:
    """Hold the group's and its owner's queues to their limits, counting the request just
    added (429 QUEUE_FULL, the limit in the message). The owner's limit counts every
    unanswered request, running ones too, so an owner cannot have more groups working at once
    than GARDEN_MAX_QUEUED_PER_OWNER. Caller holds FOR UPDATE on the group row and has written
    the new request; this takes the owner's quota lock, last."""
    queued = GroupRequest.objects.filter(state=GroupRequest.State.QUEUED)
    unanswered = GroupRequest.objects.filter(
        state__in=[GroupRequest.State.QUEUED, *GroupRequest.ACTIVE_STATES]
    )
    per_group = settings.GARDEN_MAX_QUEUED_PER_GROUP
    quota_hold(
        owner_id=group.owner_id,
        count=queued.filter(group=group).count,
        limit=per_group,
        refusal=lambda: QuotaExceeded(
            "QUEUE_FULL",
            f"{'This agent' if group.is_solo else 'This group'} already has {per_group} "
            "messages waiting, the "
            "limit on this site; wait for them to be answered (or Stop) before sending "
            "more.",
            field="text",
            status=429,
        ),
    )
    per_owner = settings.GARDEN_MAX_QUEUED_PER_OWNER
    quota_hold(
        owner_id=group.owner_id,
        count=unanswered.filter(group__owner_id=group.owner_id).count,
        limit=per_owner,
        refusal=lambda: QuotaExceeded(
            "QUEUE_FULL",
            f"You already have {per_owner} messages waiting across your "
            "groups and agents (being answered or queued), the limit on this site; wait for them "
            "to be answered before sending more.",
            field="text",
            status=429,
        ),
    )


@retry_on_lock_conflict
def request_create(
    *,
    group: Group,
    text: str,
    source: str = GroupRequest.Source.OWNER,
    attachments: Sequence[Upload] = (),
    webhook: int | None = None,
) -> GroupRequest:
    """Store the owner's turn and a queued GroupRequest in one transaction; start it after commit.

    Mentions route the request: ``@handle`` members contribute in the order named, then the
    coordinator resumes. Unknown or non-member handles are refused and nothing is stored.
    ``attachments`` are checked first (garden/attachments.py, refused by name) and stored as
    artifacts of the open thread in the same transaction; the turn carries one artifact_ref
    block per file after its text, and may then be files alone. ``webhook`` names one of the
    owner's webhook endpoints that hears this request's ending (WEBHOOK_NOT_FOUND otherwise).
    """
    text = text.strip()
    checked = attachments_check(attachments)
    if not text and not checked:
        raise ServiceError("EMPTY_CONTENT", "The message is empty.", field="text")
    with transaction.atomic():
        locked = row_locks.lock_group(group.pk, live=True)
        if locked is None or locked.is_solo:
            raise ServiceError("NOT_FOUND", "No such group.", field="group", status=404)
        members = {m.agent.handle: m.agent for m in locked.memberships.select_related("agent")}
        mentions = parse_mentions(text, set(members))
        if mentions.unknown:
            raise ServiceError(
                "UNKNOWN_MEMBER",
                "Not members of this group: " + ", ".join(f"@{h}" for h in mentions.unknown) + ".",
                field="text",
            )
        cannot = [h for h in mentions.handles if not members[h].can_run]
        if cannot:
            raise ServiceError(
                "MEMBER_CANNOT_RUN",
                "Cannot run now: " + ", ".join(f"@{h}" for h in cannot) + ".",
                field="text",
            )
        queue = [
            Contribution(agent=members[h].pk, source="mention").to_json() for h in mentions.handles
        ]
        return _request_queued(
            locked,
            group_conversation_open(group=locked),
            text=text,
            attachments=checked,
            queue=queue,
            source=source,
            webhook=webhook_named_check(
                owner_id=locked.owner_id, group_id=locked.pk, endpoint_id=webhook
            ),
        )


def solo_room_for(*, agent_id: int) -> Group:
    """The agent's own room (a team of one, ``Group.Kind.SOLO``), made on first use.

    Its 1:1 conversations' requests run in it, so they share the group loop whole: one
    request at a time per agent (the others queue), the same twelve calls, tools, approvals,
    Stop, drafts and the sweeper. Its cap is GARDEN_CHAT_CAP_CHARS."""
    agent = Agent.objects.get(pk=agent_id)
    found = Group.objects.filter(kind=Group.Kind.SOLO, coordinator_id=agent_id).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return Group.objects.create(
                owner_id=agent.owner_id,
                kind=Group.Kind.SOLO,
                name=agent.name[:100],
                coordinator=agent,
                room_cap_chars=settings.GARDEN_CHAT_CAP_CHARS,
            )
    except IntegrityError:
        # Made by a concurrent first message (one_solo_room_per_agent kept one).
        return Group.objects.get(kind=Group.Kind.SOLO, coordinator_id=agent_id)


@retry_on_lock_conflict
def conversation_request_create(
    *,
    owner: AbstractBaseUser,
    conversation: Conversation,
    text: str,
    source: str = GroupRequest.Source.OWNER,
    attachments: Sequence[Upload] = (),
    webhook: int | None = None,
) -> GroupRequest:
    """A message to one agent: the owner's turn in its 1:1 ``conversation`` and a queued
    request of the agent's own room (``solo_room_for``), in one transaction, started after
    commit — the same loop, limits and refusals as a group's request; no mentions route it."""
    text = text.strip()
    checked = attachments_check(attachments)
    if not text and not checked:
        raise ServiceError("EMPTY_CONTENT", "The message is empty.", field="text")
    if conversation.owner_id != owner.pk or conversation.agent_id is None:
        raise ServiceError(
            "CONVERSATION_NOT_FOUND", "No such conversation.", field="conversation", status=404
        )
    room = solo_room_for(agent_id=conversation.agent_id)
    with transaction.atomic():
        locked = row_locks.lock_group(room.pk)
        thread = Conversation.objects.select_related("agent").get(pk=conversation.pk)
        if thread.status != Conversation.Status.OPEN:
            raise ServiceError(
                "CONVERSATION_CLOSED", "This conversation is closed.", field="conversation"
            )
        if not thread.agent.can_run:
            raise ServiceError(
                "AGENT_CANNOT_RUN",
                f"@{thread.agent.handle} cannot run now: it has no model account or was removed.",
                field="conversation",
            )
        return _request_queued(
            locked,
            thread,
            text=text,
            attachments=checked,
            queue=[],
            source=source,
            webhook=webhook_named_check(
                owner_id=locked.owner_id, group_id=locked.pk, endpoint_id=webhook
            ),
        )


def _request_queued(
    locked: Group,
    conversation: Conversation,
    *,
    text: str,
    attachments: Sequence[Upload],
    queue: list[dict],
    source: str,
    webhook: int | None = None,
) -> GroupRequest:
    """The request and the owner's turn in ``conversation``; caller holds FOR UPDATE on the
    group row ``locked`` and has checked everything but the quotas, which are taken here."""
    # The request's trace starts here, under the HTTP request that posted it: its steps join it.
    traced = telemetry.request_started(group_id=locked.pk, source=source)
    request = GroupRequest.objects.create(
        group=locked,
        conversation=conversation,
        source=source,
        queue=queue,
        webhook_id=webhook,
        trace_context=traced.traceparent,
    )
    traced.accepted(request_id=request.pk)
    content = [text_block(text)] if text else []
    for attachment in attachments:
        stored = attachment_store(
            owner_id=locked.owner_id, conversation_id=conversation.pk, attachment=attachment
        )
        content.append(artifact_ref_block(stored))
    channel = events.group_channel(locked.pk)
    message = message_append(
        conversation_id=conversation.pk,
        speaker_kind=Message.SpeakerKind.OWNER,
        content=content,
        request_id=request.pk,
        channel=channel,
    )
    request.message = message
    request.save(update_fields=["message"])
    # The owner's quota lock last, after the thread's row (row_locks' order).
    check_queue_room(group=locked)
    if attachments:
        attachment_bytes_hold(owner_id=locked.owner_id)
    storage_hold(owner_id=locked.owner_id, field="text")
    events.send_event_on_commit(channel=channel, event=request_event(request))
    scheduling.start_next_on_commit(locked.pk)
    return request


def request_start_next(*, group_id: int) -> GroupRequest | None:
    """Start the oldest queued request of the group when none is active. Idempotent."""
    with transaction.atomic():
        group = row_locks.lock_group(group_id)
        if group is None:
            return None
        if GroupRequest.objects.filter(group=group, state__in=GroupRequest.ACTIVE_STATES).exists():
            return None
        queued = row_locks.lock_group_requests(
            group_id, states=[GroupRequest.State.QUEUED], limit=1
        )
        request = queued[0] if queued else None
        if request is None:
            return None
        request.state = GroupRequest.State.RUNNING
        request.started_at = timezone.now()
        request.save(update_fields=["state", "started_at", "updated_at"])
        events.send_event_on_commit(
            channel=events.group_channel(group_id), event=request_event(request)
        )
        fence = request.fence
        scheduling.enqueue_step_on_commit(request.pk, fence, group_id=group_id)
    return request


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
        locked = row_locks.lock_group(room.pk)
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
    idle_groups = (
        GroupRequest.objects.filter(state=GroupRequest.State.QUEUED, created_at__lte=cutoff)
        .exclude(group__requests__state__in=GroupRequest.ACTIVE_STATES)
        .values_list("group_id", flat=True)
        .distinct()
    )
    for group_id in idle_groups:
        if request_start_next(group_id=group_id):
            found["started"] += 1
    for message_id in unanswered_turns(older_than=timedelta(seconds=age)):
        if request_for_unanswered_turn(message_id=message_id):
            found["answered"] += 1
    return found
