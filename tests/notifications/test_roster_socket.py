"""The roster's socket carries an owner's reply notifications from their notifications
channel; opened for notifications alone (``?only=notifications``, any page but the roster),
it carries nothing of their groups."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from config.routing import websocket_urlpatterns
from notifications.payloads import owner_channel
from tests.dashboard.helpers import household

pytestmark = pytest.mark.django_db(transaction=True)

STATE = {"type": "request.state", "request": {"group": 0, "state": "running"}}


def notice(message: int) -> dict:
    return {"type": "notification.reply", "message": message}


def received(user, path: str, sends: list[tuple[str, dict]]) -> list[dict]:
    """What a socket at ``path`` receives of ``sends`` (channel, event), in order; the last
    send is one it must receive, so everything before it has been delivered or dropped."""

    async def run():
        communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
        communicator.scope["user"] = user
        connected, _ = await communicator.connect()
        assert connected
        layer = get_channel_layer()
        for channel, event in sends:
            await layer.group_send(channel, {"type": "garden.event", "event": event})
        out = []
        while not out or out[-1] != sends[-1][1]:
            out.append(await communicator.receive_json_from(timeout=2))
        await communicator.disconnect()
        return out

    return async_to_sync(run)()


def test_the_roster_carries_its_groups_and_the_owners_notifications(owner, stranger):
    group = household(owner)
    sends = [
        (owner_channel(stranger.pk), notice(1)),
        (f"group-{group.pk}", STATE),
        (owner_channel(owner.pk), notice(2)),
    ]
    assert received(owner, "/ws/roster/", sends) == [STATE, notice(2)]


def test_for_notifications_alone_no_group_traffic_is_carried(owner, stranger):
    group = household(owner)
    sends = [
        (f"group-{group.pk}", STATE),
        (owner_channel(stranger.pk), notice(1)),
        (owner_channel(owner.pk), notice(2)),
    ]
    assert received(owner, "/ws/roster/?only=notifications", sends) == [notice(2)]
