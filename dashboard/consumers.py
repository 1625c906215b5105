"""The room's websocket: the group's live events, for its owner only.

Channels delivers at most once; the page re-fetches from the API on reconnect or on a gap in
``seq``, so this consumer only forwards what the group's channel carries.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from garden.events import group_channel
from groups.selectors import group_get

FORBIDDEN = 4403


@database_sync_to_async
def _owns(user: Any, group_id: int) -> bool:
    if not (user and user.is_authenticated and user.is_active):
        return False
    return group_get(owner=user, group_id=group_id) is not None


class GroupConsumer(AsyncJsonWebsocketConsumer):
    channel_group: str | None = None

    async def connect(self) -> None:
        group_id = int(self.scope["url_route"]["kwargs"]["group_id"])
        if not await _owns(self.scope.get("user"), group_id):
            # Accept, then close with a code the page can read: a refused handshake says nothing.
            await self.accept()
            await self.close(code=FORBIDDEN)
            return
        # Join before accepting: once the page sees the socket open, no event can slip past the
        # re-fetch it makes then.
        self.channel_group = group_channel(group_id)
        await self.channel_layer.group_add(self.channel_group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.channel_group:
            await self.channel_layer.group_discard(self.channel_group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """The page only listens; anything it sends is ignored."""

    async def garden_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["event"])
