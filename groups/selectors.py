"""Reads of groups. Every selector takes the owner and returns only that owner's groups."""

from __future__ import annotations

from collections.abc import Collection

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Prefetch, QuerySet, TextField
from django.db.models.functions import Cast, Length

from garden.errors import is_row_id
from garden.models import Approval, AttachmentData, Conversation, MemoryNote, Message
from groups.models import Group, GroupRequest, Membership

# At most this many turns per page of a room's transcript.
ROOM_PAGE = 500


def _with_members(qs: QuerySet[Group]) -> QuerySet[Group]:
    ordered = Membership.objects.select_related("agent").order_by("position", "id")
    return qs.select_related("coordinator").prefetch_related(
        Prefetch("memberships", queryset=ordered, to_attr="ordered_memberships")
    )


def group_list(*, owner: AbstractBaseUser) -> QuerySet[Group]:
    """The owner's roster: neither deleted nor archived."""
    return _with_members(
        Group.objects.filter(
            owner=owner, kind=Group.Kind.TEAM, deleted_at__isnull=True, archived_at__isnull=True
        )
    )


def group_get(*, owner: AbstractBaseUser, group_id: int) -> Group | None:
    """One of the owner's groups by id; archived ones still read, deleted ones do not, and an
    agent's own room is not a group (it is reached through its conversations)."""
    if not is_row_id(group_id):
        return None
    return _with_members(
        Group.objects.filter(
            owner=owner, kind=Group.Kind.TEAM, deleted_at__isnull=True, pk=group_id
        )
    ).first()


def group_has_purge_due(*, owner: AbstractBaseUser, cutoff) -> bool:
    """Whether one of the owner's deleted groups is past its minute to undo."""
    return Group.objects.filter(owner=owner, deleted_at__lt=cutoff).exists()


def room_conversation(*, group: Group, conversation_id: int | None = None) -> Conversation | None:
    """The group's open thread, or — by id — one of its closed ones."""
    threads = Conversation.objects.filter(group=group)
    if conversation_id is not None:
        return threads.filter(pk=conversation_id).first() if is_row_id(conversation_id) else None
    return threads.filter(status=Conversation.Status.OPEN).order_by("-id").first()


def room_messages(*, conversation: Conversation, after: int = 0) -> list[Message]:
    """The thread's turns after seq ``after``, in order, one page at most: ROOM_PAGE turns or
    GARDEN_ROOM_PAGE_CHARS characters of content, whichever comes first (and always one turn,
    so paging never stalls). The sizes are read first, so a page of large turns is never
    loaded whole to be cut."""
    turns = Message.objects.filter(conversation=conversation, seq__gt=after).order_by("seq")
    sizes = turns.annotate(size=Length(Cast("content", TextField()))).values_list("seq", "size")
    budget, total, last = settings.GARDEN_ROOM_PAGE_CHARS, 0, None
    for seq, size in sizes[:ROOM_PAGE]:
        total += size or 0
        if last is not None and total > budget:
            break
        last = seq
    if last is None:
        return []
    return list(turns.filter(seq__lte=last).select_related("speaker_agent"))


def _requests(group: Group | None, conversation: Conversation | None) -> QuerySet[GroupRequest]:
    """A group's requests, or — given ``conversation`` — that thread's (an agent's 1:1
    conversation shares its agent's room with the agent's other conversations)."""
    rows = GroupRequest.objects.all()
    if group is not None:
        rows = rows.filter(group=group)
    if conversation is not None:
        rows = rows.filter(conversation=conversation)
    return rows


def request_active(
    *, group: Group | None = None, conversation: Conversation | None = None
) -> GroupRequest | None:
    return _requests(group, conversation).filter(state__in=GroupRequest.ACTIVE_STATES).first()


def requests_queued(
    *, group: Group | None = None, conversation: Conversation | None = None, limit: int = 20
) -> list[GroupRequest]:
    """The group's (or the thread's) queued requests, the next to start first."""
    return list(
        _requests(group, conversation)
        .filter(state=GroupRequest.State.QUEUED)
        .order_by("id")[:limit]
    )


def requests_queued_count(
    *, group: Group | None = None, conversation: Conversation | None = None
) -> int:
    return _requests(group, conversation).filter(state=GroupRequest.State.QUEUED).count()


def request_get(
    *, group: Group | None = None, conversation: Conversation | None = None, request_id: int
) -> GroupRequest | None:
    if not is_row_id(request_id) or (group is None and conversation is None):
        return None
    return _requests(group, conversation).filter(pk=request_id).first()


def solo_rooms(*, owner: AbstractBaseUser) -> QuerySet[Group]:
    """The owner's agents' own rooms (made on each agent's first 1:1 message)."""
    return Group.objects.filter(owner=owner, kind=Group.Kind.SOLO)


def solo_room_of(*, conversation: Conversation) -> Group | None:
    """The room an agent's 1:1 ``conversation`` runs in; None before its first message."""
    if conversation.agent_id is None:
        return None
    return Group.objects.filter(kind=Group.Kind.SOLO, coordinator_id=conversation.agent_id).first()


def approval_list(
    *,
    owner: AbstractBaseUser,
    status: str | None = None,
    conversation_id: int | None = None,
    limit: int = 200,
):
    """The owner's approvals (of live groups and kept history), oldest first; ``status`` and
    ``conversation_id`` filter. Approvals of cleared history are decided and detached: they
    answer a decision, not the list."""
    approvals = Approval.objects.filter(owner=owner, conversation__isnull=False).select_related(
        "agent", "request"
    )
    if status:
        approvals = approvals.filter(status=status)
    if conversation_id is not None:
        if not is_row_id(conversation_id):
            return Approval.objects.none()
        approvals = approvals.filter(conversation_id=conversation_id)
    return approvals.exclude(request__group__deleted_at__isnull=False).order_by("id")[:limit]


def group_memory(*, group: Group) -> QuerySet[MemoryNote]:
    """The notes of the group's memory scope, oldest first."""
    return MemoryNote.objects.filter(owner_id=group.owner_id, scope=group.memory_scope).order_by(
        "id"
    )


def attachments_to_carry(
    *,
    group: Group,
    conversation_id: int,
    artifact_ids: Collection[int],
    media_types: Collection[str],
    limit: int,
) -> dict[int, tuple[str, bytes]]:
    """Of ``artifact_ids``, the files the owner attached in ``group`` (in an agent's own room:
    in its 1:1 thread ``conversation_id``) whose media type is among ``media_types``, the
    ``limit`` most recent: artifact id → (media type, bytes). Another owner's, another
    group's or another thread's artifact is never among them, whatever id a turn names."""
    if not artifact_ids or not media_types or limit <= 0:
        return {}
    where = (
        {"artifact__conversation_id": conversation_id}
        if group.is_solo
        else {"artifact__conversation__group_id": group.pk}
    )
    rows = (
        AttachmentData.objects.filter(
            artifact_id__in=list(artifact_ids),
            artifact__owner_id=group.owner_id,
            artifact__mime_type__in=list(media_types),
            **where,
        )
        .order_by("-artifact_id")
        .values_list("artifact_id", "artifact__mime_type", "data")[:limit]
    )
    return {pk: (media_type, bytes(data)) for pk, media_type, data in rows}
