"""The room's websocket: the group's live events, for its owner only.

Channels delivers at most once; the page re-fetches from the API on reconnect or on a gap in
``seq``, so this consumer only forwards what the group's channel carries. A person has at most
GARDEN_MAX_SOCKETS_PER_USER of them open in one web process; the next is closed with 4429.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from dashboard.sockets import SIGNED_OUT, session_sockets, user_sockets
from garden import metrics
from garden.events import group_channel
from garden.selectors import conversation_get
from groups.selectors import group_get, group_list, request_active, solo_rooms
from groups.services.requests import solo_room_for
from notifications.payloads import owner_channel
from operator_messages.driver import OPERATOR_CHANNEL

FORBIDDEN = 4403
TOO_MANY_SOCKETS = 4429

# Open room sockets per user in this process. Every consumer of a process runs on its one
# event loop, and the check and the count below have no ``await`` between them, so no lock.
_open: Counter[int] = Counter()


@database_sync_to_async
def _owns(user: Any, group_id: int) -> bool:
    if not (user and user.is_authenticated and user.is_active):
        return False
    return group_get(person=user, group_id=group_id) is not None


@database_sync_to_async
def _roster_groups(user: Any) -> list[int] | None:
    if not (user and user.is_authenticated and user.is_active):
        return None
    # An agent's own room too: its agent's state on the roster follows its 1:1 work.
    return [
        *group_list(person=user).values_list("pk", flat=True),
        *solo_rooms(owner=user).values_list("pk", flat=True),
    ]


# Who sees the gardener's channel: staff who may read the operator-messages admin.
OPERATOR_PERMISSION = "operator_messages.view_operatormessagerun"


@database_sync_to_async
def _operator(user: Any) -> bool:
    if not (user and user.is_authenticated and user.is_active and user.is_staff):
        return False
    return user.has_perm(OPERATOR_PERMISSION)


@database_sync_to_async
def _agents_room(user: Any, conversation_id: int) -> tuple[int, set[int]] | None:
    """The room of the person's 1:1 conversation ``conversation_id`` (made if it is new) and
    the thread's requests running now, or None for no such conversation of theirs."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return None
    conversation = conversation_get(owner=user, conversation_id=conversation_id)
    if conversation is None or conversation.agent_id is None:
        return None
    active = request_active(conversation=conversation)
    return solo_room_for(agent_id=conversation.agent_id).pk, {active.pk} if active else set()


class _OwnersSocket(AsyncJsonWebsocketConsumer):
    """A signed-in person's socket on some of their groups' channels: counted against
    GARDEN_MAX_SOCKETS_PER_USER, and closed by signing out, deactivation or a new password."""

    channel_groups: tuple[str, ...] = ()
    counted: int | None = None  # the user this socket is counted against
    close_groups: tuple[str, ...] = ()  # signing out or deactivation closes the socket by these
    metrics_kind = "room"  # the label this socket is counted under (garden_websocket_connections)

    async def refuse(self, code: int) -> None:
        # Accept, then close with a code the page can read: a refused handshake says nothing.
        await self.accept()
        await self.close(code=code)

    async def join(self, user: Any, channels: tuple[str, ...]) -> None:
        if _open[user.pk] >= settings.GARDEN_MAX_SOCKETS_PER_USER:
            # Each socket holds a consumer and a channel-layer subscription in a shared process.
            await self.refuse(TOO_MANY_SOCKETS)
            return
        _open[user.pk] += 1
        self.counted = user.pk
        metrics.websocket_opened(self.metrics_kind)
        # Signing out closes this session's sockets; deactivation closes all of the user's.
        session_key = getattr(self.scope.get("session"), "session_key", None)
        self.close_groups = (user_sockets(user.pk),) + (
            (session_sockets(session_key),) if session_key else ()
        )
        # Join before accepting: once the page sees the socket open, no event can slip past the
        # re-fetch it makes then.
        try:
            for name in (*channels, *self.close_groups):
                await self.channel_layer.group_add(name, self.channel_name)
                self.channel_groups += (name,)
        except BaseException:
            await self.disconnect(0)
            raise
        await self.accept()

    async def disconnect(self, code: int) -> None:
        self._uncount()
        for name in self.channel_groups:
            await self.channel_layer.group_discard(name, self.channel_name)
        self.channel_groups = ()

    def _uncount(self) -> None:
        if self.counted is not None:
            metrics.websocket_closed(self.metrics_kind)
            _open[self.counted] -= 1
            if _open[self.counted] <= 0:
                del _open[self.counted]
            self.counted = None

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """The page only listens; anything it sends is ignored."""

    async def garden_close(self, message: dict[str, Any]) -> None:
        """Signed out, deactivated or a new password: this socket's session is over; or what
        the person may reach changed (``code`` REACH_CHANGED): the page reconnects."""
        await self.close(code=message.get("code", SIGNED_OUT))


class GroupConsumer(_OwnersSocket):
    """The room's socket: everything its group's channel carries."""

    async def connect(self) -> None:
        group_id = int(self.scope["url_route"]["kwargs"]["group_id"])
        user = self.scope.get("user")
        if not await _owns(user, group_id):
            await self.refuse(FORBIDDEN)
            return
        await self.join(user, (group_channel(group_id),))

    async def garden_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["event"])


def _of_thread(event: dict[str, Any], conversation_id: int, requests: set[int]) -> bool:
    """Whether ``event`` belongs to the thread ``conversation_id`` (an agent's room carries all
    of its conversations); ``requests`` are the thread's requests seen so far (a draft names
    only its request, whose state event always comes first)."""
    kind = event.get("type", "")
    if kind == "message.created":
        return event["message"].get("conversation") == conversation_id
    if kind == "request.state":
        if event["request"].get("conversation") != conversation_id:
            return False
        requests.add(event["request"]["id"])
        return True
    if kind == "request.draft":
        return event.get("request") in requests
    if kind.startswith("approval."):
        return event["approval"].get("conversation") == conversation_id
    return False


class ConversationConsumer(_OwnersSocket):
    """A 1:1 conversation's socket: what its agent's room carries of this thread."""

    metrics_kind = "conversation"

    async def connect(self) -> None:
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        user = self.scope.get("user")
        found = await _agents_room(user, self.conversation_id)
        if found is None:
            await self.refuse(FORBIDDEN)
            return
        # A draft names only its request: the one running when the page connected is known.
        room_id, self.requests = found
        await self.join(user, (group_channel(room_id),))

    async def garden_event(self, message: dict[str, Any]) -> None:
        event = message["event"]
        if event.get("type") != "batch":
            if _of_thread(event, self.conversation_id, self.requests):
                await self.send_json(event)
            return
        kept = [
            e for e in event.get("events", []) if _of_thread(e, self.conversation_id, self.requests)
        ]
        if kept:
            await self.send_json({**event, "events": kept})


# What the roster shows of a group's events: its requests' states and its approvals; and,
# from the person's notifications channel, their agents' replies to notify.
ROSTER_EVENTS = frozenset(
    {"request.state", "approval.created", "approval.decided", "notification.reply"}
)

# ws/roster/?only=notifications: the notifications channel alone (notifications.js).
NOTIFICATIONS_ONLY = b"only=notifications"


class RosterConsumer(_OwnersSocket):
    """The roster's socket: the state of each of the person's groups (working, waiting for
    their approval, failed), from those groups' channels, the rest of their traffic dropped
    here, and their agents' replies to notify, from their notifications channel (any page
    opens it for that). A group made after the page opened is seen on its next load."""

    metrics_kind = "roster"

    async def connect(self) -> None:
        user = self.scope.get("user")
        group_ids = await _roster_groups(user)
        if group_ids is None:
            await self.refuse(FORBIDDEN)
            return
        # A page other than the roster listens for notifications alone: none of its groups'
        # traffic is sent here to be dropped.
        if self.scope.get("query_string") == NOTIFICATIONS_ONLY:
            group_ids = []
        await self.join(user, (*(group_channel(pk) for pk in group_ids), owner_channel(user.pk)))

    async def garden_event(self, message: dict[str, Any]) -> None:
        event = message["event"]
        events = event.get("events", []) if event.get("type") == "batch" else [event]
        for one in events:
            if one.get("type") in ROSTER_EVENTS:
                await self.send_json(one)


# What the operator channel carries that the operator-messages admin shows as it happens.
OPERATOR_EVENTS = frozenset({"tend.finished"})


class OperatorConsumer(_OwnersSocket):
    """The operator-messages admin's socket: the gardener's channel (a tend run finished, and
    whether it left a note), for staff who may read that admin only."""

    metrics_kind = "operator"

    async def connect(self) -> None:
        user = self.scope.get("user")
        if not await _operator(user):
            await self.refuse(FORBIDDEN)
            return
        await self.join(user, (OPERATOR_CHANNEL,))

    async def garden_event(self, message: dict[str, Any]) -> None:
        event = message["event"]
        if event.get("type") in OPERATOR_EVENTS:
            await self.send_json(event)
