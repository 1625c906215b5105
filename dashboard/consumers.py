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
from garden.events import group_channel
from groups.selectors import group_get

FORBIDDEN = 4403
TOO_MANY_SOCKETS = 4429

# Open room sockets per user in this process. Every consumer of a process runs on its one
# event loop, and the check and the count below have no ``await`` between them, so no lock.
_open: Counter[int] = Counter()


@database_sync_to_async
def _owns(user: Any, group_id: int) -> bool:
    if not (user and user.is_authenticated and user.is_active):
        return False
    return group_get(owner=user, group_id=group_id) is not None


class GroupConsumer(AsyncJsonWebsocketConsumer):
    channel_group: str | None = None
    counted: int | None = None  # the user this socket is counted against
    close_groups: tuple[str, ...] = ()  # signing out or deactivation closes the socket by these

    async def connect(self) -> None:
        group_id = int(self.scope["url_route"]["kwargs"]["group_id"])
        user = self.scope.get("user")
        if not await _owns(user, group_id):
            # Accept, then close with a code the page can read: a refused handshake says nothing.
            await self.accept()
            await self.close(code=FORBIDDEN)
            return
        if _open[user.pk] >= settings.GARDEN_MAX_SOCKETS_PER_USER:
            # Each socket holds a consumer and a channel-layer subscription in a shared process.
            await self.accept()
            await self.close(code=TOO_MANY_SOCKETS)
            return
        _open[user.pk] += 1
        self.counted = user.pk
        # Join before accepting: once the page sees the socket open, no event can slip past the
        # re-fetch it makes then.
        self.channel_group = group_channel(group_id)
        try:
            await self.channel_layer.group_add(self.channel_group, self.channel_name)
        except BaseException:
            self._uncount()
            raise
        # Signing out closes this session's sockets; deactivation closes all of the user's.
        session_key = getattr(self.scope.get("session"), "session_key", None)
        self.close_groups = (user_sockets(user.pk),) + (
            (session_sockets(session_key),) if session_key else ()
        )
        for name in self.close_groups:
            await self.channel_layer.group_add(name, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        self._uncount()
        if self.channel_group:
            await self.channel_layer.group_discard(self.channel_group, self.channel_name)
        for name in self.close_groups:
            await self.channel_layer.group_discard(name, self.channel_name)

    def _uncount(self) -> None:
        if self.counted is not None:
            _open[self.counted] -= 1
            if _open[self.counted] <= 0:
                del _open[self.counted]
            self.counted = None

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """The page only listens; anything it sends is ignored."""

    async def garden_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["event"])

    async def garden_close(self, message: dict[str, Any]) -> None:
        """Signed out, deactivated or a new password: this socket's session is over."""
        await self.close(code=SIGNED_OUT)
