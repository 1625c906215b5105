"""The room's websocket: only the owner of a non-deleted group joins its channel; everyone else
is closed with 4403. Events on the group's channel reach the owner as JSON."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.test import Client

from config.asgi import application
from config.routing import websocket_urlpatterns
from groups.services.groups import group_delete
from tests.dashboard.helpers import household

pytestmark = pytest.mark.django_db(transaction=True)


def first_output(user, path: str) -> dict:
    """Connect through the routes with ``user`` in the scope; what the consumer sends first."""

    async def run():
        communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
        communicator.scope["user"] = user
        await communicator.connect()
        output = await communicator.receive_output(timeout=2)
        await communicator.disconnect()
        return output

    return async_to_sync(run)()


def test_the_owner_receives_the_groups_events(owner):
    group = household(owner)

    async def run():
        communicator = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns), f"/ws/groups/{group.pk}/"
        )
        communicator.scope["user"] = owner
        connected, _ = await communicator.connect()
        assert connected
        event = {"type": "batch", "events": [{"type": "message.created", "seq": 3, "message": {}}]}
        await get_channel_layer().group_send(
            f"group-{group.pk}", {"type": "garden.event", "event": event}
        )
        received = await communicator.receive_json_from(timeout=2)
        await get_channel_layer().group_send(
            f"group-{group.pk + 1}", {"type": "garden.event", "event": {"type": "other"}}
        )
        assert await communicator.receive_nothing(timeout=0.2)
        await communicator.disconnect()
        return received

    assert async_to_sync(run)() == {
        "type": "batch",
        "events": [{"type": "message.created", "seq": 3, "message": {}}],
    }


@pytest.mark.parametrize("who", ["stranger", "anonymous", "deleted", "missing"])
def test_everyone_else_is_closed_with_4403(owner, stranger, who):
    group = household(owner)
    user = {"stranger": stranger, "anonymous": AnonymousUser()}.get(who, owner)
    group_id = group.pk + 100 if who == "missing" else group.pk
    if who == "deleted":
        group_delete(group=group)
    assert first_output(user, f"/ws/groups/{group_id}/") == {
        "type": "websocket.close",
        "code": 4403,
    }


def test_the_full_stack_reads_the_session(owner, stranger):
    """config.asgi: origin check, session auth and the route, as a browser meets them."""
    group = household(owner)

    def open_as(user) -> tuple[bool, dict | None]:
        client = Client()
        client.force_login(user)
        cookie = (
            f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
        )

        async def run():
            communicator = WebsocketCommunicator(
                application,
                f"/ws/groups/{group.pk}/",
                headers=[
                    (b"cookie", cookie.encode()),
                    (b"origin", b"http://testserver"),
                    (b"host", b"testserver"),
                ],
            )
            connected, _ = await communicator.connect()
            closed = None
            if not await communicator.receive_nothing(timeout=0.3):
                closed = await communicator.receive_output()
            await communicator.disconnect()
            return connected, closed

        return async_to_sync(run)()

    assert open_as(stranger) == (True, {"type": "websocket.close", "code": 4403})
    assert open_as(owner) == (True, None)


@pytest.mark.parametrize(
    ("origin", "opens"),
    [
        (b"http://testserver", True),
        (b"http://evil.example", False),
        (b"http://testserver.evil.example", False),
        (b"null", False),
        (None, True),  # not a browser: it can only carry its own session
    ],
)
def test_another_sites_page_cannot_open_a_room(owner, settings, origin, opens):
    """Even in development, where ALLOWED_HOSTS is '*'."""
    settings.ALLOWED_HOSTS = ["*"]
    group = household(owner)
    client = Client()
    client.force_login(owner)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    headers = [(b"cookie", cookie.encode()), (b"host", b"testserver")]
    if origin is not None:
        headers.append((b"origin", origin))

    async def run():
        communicator = WebsocketCommunicator(
            application, f"/ws/groups/{group.pk}/", headers=headers
        )
        connected, _ = await communicator.connect()
        await communicator.disconnect()
        return connected

    assert async_to_sync(run)() is opens


def test_a_person_has_at_most_the_cap_of_sockets_open_and_the_next_is_closed_4429(
    owner, stranger, settings
):
    settings.GARDEN_MAX_SOCKETS_PER_USER = 2
    group = household(owner)
    theirs = household(stranger)
    ping = {"type": "batch", "events": [{"type": "message.created", "seq": 1, "message": {}}]}

    def socket(user, group_id):
        communicator = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns), f"/ws/groups/{group_id}/"
        )
        communicator.scope["user"] = user
        return communicator

    async def live(group_id, *communicators):
        """Each of ``communicators`` is open and joined: an event of the group reaches it."""
        await get_channel_layer().group_send(
            f"group-{group_id}", {"type": "garden.event", "event": ping}
        )
        return [await c.receive_json_from(timeout=2) == ping for c in communicators]

    async def run():
        first, second, third = (socket(owner, group.pk) for _ in range(3))
        for communicator in (first, second, third):
            await communicator.connect()
        refused = await third.receive_output(timeout=2)
        opened = await live(group.pk, first, second)
        # Another person's sockets are counted apart.
        other = socket(stranger, theirs.pk)
        await other.connect()
        others = await live(theirs.pk, other)
        # A socket that closes frees its place.
        await first.disconnect()
        again = socket(owner, group.pk)
        await again.connect()
        reopened = await live(group.pk, second, again)
        for communicator in (second, other, again):
            await communicator.disconnect()
        return refused, opened, others, reopened

    refused, opened, others, reopened = async_to_sync(run)()
    assert refused == {"type": "websocket.close", "code": 4429}
    assert opened == [True, True] and others == [True] and reopened == [True, True]


def test_the_rosters_socket_carries_only_the_owners_request_and_approval_events(owner, stranger):
    mine = household(owner)
    theirs = household(stranger)

    async def run():
        communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/roster/")
        communicator.scope["user"] = owner
        connected, _ = await communicator.connect()
        assert connected
        layer = get_channel_layer()
        state = {"type": "request.state", "request": {"group": mine.pk, "state": "running"}}
        batch = {
            "type": "batch",
            "events": [
                {"type": "message.created", "seq": 3, "message": {"content": "words"}},
                {"type": "request.draft", "text": "more words"},
                state,
            ],
        }
        await layer.group_send(f"group-{mine.pk}", {"type": "garden.event", "event": batch})
        first = await communicator.receive_json_from(timeout=2)
        # Another owner's group: nothing reaches this socket.
        await layer.group_send(f"group-{theirs.pk}", {"type": "garden.event", "event": state})
        assert await communicator.receive_nothing(timeout=0.2)
        await communicator.disconnect()
        return first

    assert async_to_sync(run)() == {
        "type": "request.state",
        "request": {"group": mine.pk, "state": "running"},
    }


def test_the_rosters_socket_refuses_someone_not_signed_in():
    assert first_output(AnonymousUser(), "/ws/roster/") == {
        "type": "websocket.close",
        "code": 4403,
    }
