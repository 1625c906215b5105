"""Writes for group requests: create from an owner message (to a group, or to one agent in
its own room), start, stop, cancel and finish; the sweep of stranded ones is in
``request_sweep``. Lock order everywhere: group row before request row; an owner's quota lock
(garden/quotas.py), when taken, last."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from garden import events, telemetry
from garden.attachments import Upload, attachments_check
from garden.errors import ServiceError, is_row_id, not_found
from garden.models import Agent, Conversation, Message
from garden.retry import retry_on_lock_conflict
from garden.services.attachments import (
    artifact_ref_block,
    attachment_bytes_hold,
    attachment_store,
)
from garden.services.conversations import conversation_create, message_append, text_block
from garden.storage import storage_hold
from groups import lock_order, scheduling
from groups.domain.routing import Contribution, parse_mentions
from groups.models import Approval, Group, GroupRequest
from groups.payloads import approval_event, request_event
from groups.services.queue_limits import check_queue_room
from groups.services.stopped_turns import drafts_kept, stop_announce, stopped_turn_record
from groups.services.webhook_deliveries import webhook_deliveries_for_request
from groups.services.webhooks import webhook_named_check
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
    for approval in lock_order.lock_pending_approvals(request.pk):
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
    drafts: dict[int, dict] | None = None,
) -> GroupRequest | None:
    """Stop the group's active request, rejecting its pending approval.

    Effects already completed stay completed, and so does what was said: the text a step
    was streaming is kept as its speaker's turn, marked stopped (``stopped_turns``), and that
    step is told to stop streaming. ``drafts`` are what ``stop_drafts`` read: a caller inside
    a transaction passes them, read before it opened (the cache is never read in one), or
    keeps none. ``include_queued`` also stops the requests
    waiting behind it (clear and delete do). ``conversation_id`` stops only that thread's
    (an agent's 1:1 conversation, whose room the agent's other conversations share).
    Returns the stopped active request, if any.
    """
    states = [*GroupRequest.ACTIVE_STATES]
    if include_queued:
        states.append(GroupRequest.State.QUEUED)
    if drafts is None:
        # What a step still streaming has shown: the cache is network I/O, never read while a
        # transaction (and the rows it locked) is open.
        drafts = {} if transaction.get_connection().in_atomic_block else stop_drafts(group.pk)
    with transaction.atomic():
        lock_order.lock_group(group.pk)
        active = None
        for request in lock_order.lock_group_requests(group.pk, states=states):
            if conversation_id is not None and request.conversation_id != conversation_id:
                continue
            was_active = request.state in GroupRequest.ACTIVE_STATES
            if was_active:
                stopped_turn_record(request=request, draft=drafts.get(request.pk))
                transaction.on_commit(functools.partial(stop_announce, request.pk))
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


def stop_drafts(group_id: int) -> dict[int, dict]:
    """What the steps of the group's active requests have shown of the replies they are
    streaming (``stopped_turns.drafts_kept``), for a stop to keep; read outside any
    transaction."""
    return drafts_kept(
        list(
            GroupRequest.objects.filter(
                group_id=group_id, state__in=GroupRequest.ACTIVE_STATES
            ).values_list("pk", "fence")
        )
    )


@retry_on_lock_conflict
def request_cancel(
    *, group: Group, request_id: int, conversation_id: int | None = None
) -> GroupRequest:
    """Cancel a queued request of ``group`` before it starts: it ends ``stopped`` (code
    CANCELLED) and its message stays in the thread. 404 for no such request of the group,
    409 NOT_QUEUED for one that has started or ended (Stop ends a started one)."""
    with transaction.atomic():
        lock_order.lock_group(group.pk)
        request = lock_order.lock_request(request_id) if is_row_id(request_id) else None
        if (
            request is None
            or request.group_id != group.pk
            or (conversation_id is not None and request.conversation_id != conversation_id)
        ):
            raise not_found("request")
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


@retry_on_lock_conflict
def request_create(
    *,
    group: Group,
    text: str,
    source: str = GroupRequest.Source.OWNER,
    attachments: Sequence[Upload] = (),
    webhook: int | None = None,
    author: AbstractBaseUser | None = None,
) -> GroupRequest:
    """Store the turn of ``author`` (the person who posted it: a room of a team workspace
    names them; None for a mission's) and a queued GroupRequest in one transaction; start it after commit.

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
        locked = lock_order.lock_group(group.pk, live=True)
        if locked is None or locked.is_solo:
            raise not_found("group", field="group")
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
            author=author,
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
        locked = lock_order.lock_group(room.pk)
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
            author=owner if source == GroupRequest.Source.OWNER else None,
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
    author: AbstractBaseUser | None = None,
) -> GroupRequest:
    """The request and ``author``'s turn in ``conversation``; caller holds FOR UPDATE on the
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
        author=author,
    )
    request.message = message
    request.save(update_fields=["message"])
    # The owner's quota lock last, after the thread's row (lock_order's order).
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
        group = lock_order.lock_group(group_id)
        if group is None:
            return None
        if GroupRequest.objects.filter(group=group, state__in=GroupRequest.ACTIVE_STATES).exists():
            return None
        queued = lock_order.lock_group_requests(
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
