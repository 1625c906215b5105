"""The room a step works in: its request, group and members read once, the transcript as the
projection sees it, and the model call itself (with the database connection handed back
before it). Read-only: the writes a step makes are in ``groups.loop.fencing``."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

from django.conf import settings
from django.db import connection

from garden import events, telemetry
from garden.errors import is_row_id
from garden.models import Agent, Conversation
from garden.providers import (
    ArtifactRef,
    Block,
    ChatMessage,
    ChatReply,
    ChatRequest,
    ProviderConfigError,
    TextSink,
    get_provider,
    inline_media_types,
)
from garden.selectors import account_config
from groups import selectors
from groups.domain.bounding import (
    INLINE_KINDS,
    RoomTooLarge,
    bound,
    bound_for_synthesis,
    keepable_from,
    with_omitted_turns,
)
from groups.domain.projection import AgentView, GroupView, Projection, Turn, project
from groups.domain.routing import Contribution
from groups.models import CallReservation, Group, GroupRequest
from groups.thread_cache import transcript


@dataclass
class Room:
    """What one step knows about its request: the rows it read once, up front."""

    request: GroupRequest
    group: Group
    members: dict[int, Agent]
    order: list[int]
    fence: int
    # The thread's last seq as the claim saw it (PostgreSQL), so the transcript knows whether
    # it holds every turn already.
    thread_last_seq: int | None = None
    # Whether the delivery running this step may run the request's next one in place: then
    # the step's last write claims the next fence too (groups/loop/step.py).
    goes_on: bool = False
    # This step's call, reserved by the write of the step before it (which claimed its fence).
    reserved_ahead: CallReservation | None = None

    @property
    def coordinator(self) -> Agent:
        return self.members[self.group.coordinator_id]

    @property
    def channel(self) -> str:
        return events.group_channel(self.group.pk)

    def next_speaker(self, queue: list[Contribution]) -> tuple[Agent | None, str]:
        """Who speaks in the request's step now and for which purpose (its reservation's):
        the coordinator's conclusion while it synthesises; else the member of the first
        contribution of ``queue`` (None when it is gone or cannot run: its contribution is
        skipped); else the coordinator."""
        working = CallReservation.Purpose.WORKING
        if self.request.state == GroupRequest.State.SYNTHESIZING:
            return self.coordinator, CallReservation.Purpose.SYNTHESIS
        if queue:
            member = self.members.get(queue[0].agent)
            return (member if member is not None and member.can_run else None), working
        return self.coordinator, working

    def by_handle(self, handle: str) -> Agent | None:
        handle = handle.lstrip("@").lower()
        return next((a for a in self.members.values() if a.handle == handle), None)


def load_room(
    request_id: int,
    fence: int,
    *,
    request: GroupRequest | None = None,
    group: Group | None = None,
    roster_stamp: str = "",
) -> Room:
    """The step's room at ``fence``: its request and group (read here unless the claim
    returned them) and the members in their order, with their model accounts — kept per
    process under the claim's ``roster_stamp``, so a roster that has not changed is not read
    again."""
    if request is None or group is None:
        request = GroupRequest.objects.select_related("group").get(pk=request_id)
        group = request.group
    else:
        request.group = group
    roster = _cached_roster(group.pk, roster_stamp) if roster_stamp else None
    if roster is None:
        roster = _read_roster(group)
        if roster_stamp:
            _keep_roster(group.pk, roster_stamp, roster)
    members, order = roster
    return Room(request=request, group=group, members=dict(members), order=list(order), fence=fence)


# Rosters by group: (stamp, (members, order)), least recently used first out. The Agent
# instances are shared by the steps of one process and only ever read.
_rosters: OrderedDict[int, tuple[str, tuple[dict[int, Agent], list[int]]]] = OrderedDict()
_rosters_lock = threading.Lock()
ROSTERS_KEPT = 1000


def _read_roster(group: Group) -> tuple[dict[int, Agent], list[int]]:
    memberships = list(
        group.memberships.select_related("agent__model_account").order_by("position", "id")
    )
    members = {m.agent_id: m.agent for m in memberships}
    if group.coordinator_id not in members:
        members[group.coordinator_id] = Agent.objects.select_related("model_account").get(
            pk=group.coordinator_id
        )
    return members, [m.agent_id for m in memberships]


def _cached_roster(group_id: int, stamp: str) -> tuple[dict[int, Agent], list[int]] | None:
    with _rosters_lock:
        kept = _rosters.get(group_id)
        if kept is None or kept[0] != stamp:
            return None
        _rosters.move_to_end(group_id)
        return kept[1]


def _keep_roster(group_id: int, stamp: str, roster: tuple[dict[int, Agent], list[int]]) -> None:
    with _rosters_lock:
        _rosters[group_id] = (stamp, roster)
        _rosters.move_to_end(group_id)
        while len(_rosters) > ROSTERS_KEPT:
            _rosters.popitem(last=False)


def forget_rosters() -> None:
    """Drop every roster kept (a database rolled back under a test reuses ids)."""
    with _rosters_lock:
        _rosters.clear()


def dispatch(
    speaker: Agent, chat: ChatRequest, *, on_text: TextSink | None = None, purpose: str = ""
) -> ChatReply:
    """``speaker``'s model call; with ``on_text``, streamed (its text handed over as it comes).
    ``purpose`` (its reservation's) names it in the ``chat {model}`` span, when traces are on."""
    if speaker.model_account is None:
        raise ProviderConfigError(f"@{speaker.handle} has no model account")
    account = speaker.model_account
    with telemetry.model_call(
        provider=account.provider,
        model=account.model,
        agent=speaker.handle,
        purpose=purpose,
        chat=chat,
    ) as call:
        config = account_config(account)
        release_connection()
        return call.replied(get_provider(config).complete(chat, on_text=on_text))


def release_connection() -> None:
    """Hand this thread's database connection back to the pool before network I/O (a model
    call, a tool), so calls in flight hold no connections; the next query takes one again.

    Only with a pool: without one, closing would reconnect on every step, and each worker
    thread keeps one connection anyway. Never inside a transaction.
    """
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()


def transcript_turns(room: Room) -> list[Turn]:
    """The room as the projection sees it: this request and everything before it — in an
    agent's own room, whose conversations never roll over, the newest GARDEN_CHAT_MAX_TURNS
    of it at most, so a long 1:1 thread costs a step what a short one does (the bounding
    then keeps what fits the cap)."""
    floor = 0
    if room.group.is_solo:
        last_seq = room.thread_last_seq
        if last_seq is None:
            last_seq = (
                Conversation.objects.filter(pk=room.request.conversation_id)
                .values_list("last_seq", flat=True)
                .first()
            ) or 0
        floor = max(0, last_seq - settings.GARDEN_CHAT_MAX_TURNS)
    return transcript(
        room.request.conversation_id,
        up_to_request=room.request.pk,
        last_seq=room.thread_last_seq,
        handles={a.pk: a.handle for a in room.members.values()},
        floor_seq=floor,
    )


def views(room: Room) -> tuple[GroupView, dict[int, AgentView]]:
    views = {
        a.pk: AgentView(id=a.pk, handle=a.handle, name=a.name, instructions=a.instructions)
        for a in room.members.values()
    }
    group = GroupView(
        id=room.group.pk,
        name=room.group.name,
        coordinator_id=room.group.coordinator_id,
        # A solo room has no memberships: its one agent is its coordinator.
        members=tuple(views[i] for i in room.order if i in views)
        or (views[room.group.coordinator_id],),
        solo=room.group.is_solo,
    )
    return group, views


@telemetry.traced("garden.projection")
def room_projection(room: Room, speaker: Agent, *, synthesis: bool) -> Projection | RoomTooLarge:
    """What ``speaker`` sees of the room, bounded to the group's cap (or the reason it
    cannot be)."""
    group, agent_views = views(room)
    turns = transcript_turns(room)
    # The oldest turns no bounding could keep are left out before the projection is built,
    # so a step in a long thread costs what one in a short thread does.
    omitted = keepable_from(turns, room.group.room_cap_chars)
    projection = project(
        turns[omitted:], agent=agent_views[speaker.pk], group=group, synthesis=synthesis
    )
    if omitted:
        projection = with_omitted_turns(projection, omitted)
    if synthesis:
        bounded = bound_for_synthesis(projection, room.group.room_cap_chars)
    else:
        bounded = bound(projection, room.group.room_cap_chars)
    if isinstance(bounded, RoomTooLarge):
        return bounded
    return with_attachments(bounded, room, speaker)


_ROW_ID = re.compile(r"[0-9]{1,19}")


def with_attachments(projection: Projection, room: Room, speaker: Agent) -> Projection:
    """``projection`` with the bytes of the owner's pictures and PDFs that the bounding left
    as references, for a speaker whose adapter carries them as content parts: at most
    GARDEN_MAX_INLINE_ATTACHMENTS, the most recent; the rest stay one-line references. Only
    the group owner's files of this group are read (groups.selectors.attachments_to_carry)."""
    account = speaker.model_account
    media = inline_media_types(account.provider, account.options) if account else frozenset()
    if not media:
        return projection
    wanted = {
        int(block.artifact_id)
        for message in projection.messages
        if message.role == "user"
        for block in message.content
        if isinstance(block, ArtifactRef)
        and block.kind.lower() in INLINE_KINDS
        and _ROW_ID.fullmatch(block.artifact_id)
    }
    found = selectors.attachments_to_carry(
        group=room.group,
        conversation_id=room.request.conversation_id,
        artifact_ids={i for i in wanted if is_row_id(i)},
        media_types=media,
        limit=settings.GARDEN_MAX_INLINE_ATTACHMENTS,
    )
    if not found:
        return projection

    def carried(block: Block) -> Block:
        if not isinstance(block, ArtifactRef) or not _ROW_ID.fullmatch(block.artifact_id):
            return block
        media_type, data = found.get(int(block.artifact_id), ("", None))
        return replace(block, media_type=media_type, data=data) if data is not None else block

    messages = tuple(
        ChatMessage(role=m.role, content=tuple(carried(b) for b in m.content))
        if m.role == "user"
        else m
        for m in projection.messages
    )
    return Projection(system=projection.system, messages=messages)
