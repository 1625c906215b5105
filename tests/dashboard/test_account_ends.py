"""When a person's account changes, what runs for them follows: deactivation (anywhere, the
admin included) stops their groups' requests, disables their missions and closes their room
sockets; signing out closes that session's sockets and no other's."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from config.asgi import application
from dashboard.receivers import DEACTIVATED
from groups.models import GroupRequest
from groups.services.requests import request_create
from groups.tasks import advance_request, start_next_request
from missions.services import Schedule, mission_create
from missions.services.missions import OWNER_DEACTIVATED
from tests.dashboard.helpers import household

pytestmark = pytest.mark.django_db(transaction=True)

PING = {"type": "batch", "events": [{"type": "message.created", "seq": 1, "message": {}}]}


def running(group) -> tuple[GroupRequest, GroupRequest]:
    """An active request of ``group`` (its first step on its way), and one queued behind it."""
    active = request_create(group=group, text="Plan the month.")
    queued = request_create(group=group, text="And the next one.")
    start_next_request(group.pk)  # what the post enqueues after commit
    active.refresh_from_db()
    assert active.state in GroupRequest.ACTIVE_STATES, active.state
    return active, queued


def mission_for(owner, group):
    return mission_create(
        owner=owner,
        name="Weekly review",
        prompt="Review this week's spending.",
        target_type="group",
        target_id=group.pk,
        schedule=Schedule(every_seconds=3600),
    )


def test_deactivating_an_owner_stops_their_requests_and_missions(owner, stranger):
    group, theirs = household(owner), household(stranger)
    active, queued = running(group)
    other, _ = running(theirs)
    mission, other_mission = mission_for(owner, group), mission_for(stranger, theirs)
    fence = active.fence

    owner.is_active = False
    owner.save()

    for request in (active, queued):
        request.refresh_from_db()
        assert (request.state, request.outcome) == ("stopped", DEACTIVATED)
    # The step that was on its way changes nothing.
    assert advance_request(request_id=active.pk, fence=fence, group_id=group.pk) == "stale"
    mission.refresh_from_db()
    mission.periodic_task.refresh_from_db()
    assert (mission.enabled, mission.disabled_reason) == (False, OWNER_DEACTIVATED)
    assert mission.periodic_task.enabled is False
    # Another owner's work goes on.
    other.refresh_from_db()
    other_mission.refresh_from_db()
    assert other.state in GroupRequest.ACTIVE_STATES and other_mission.enabled


def test_deactivating_in_the_admin_does_the_same(owner, django_user_model):
    group = household(owner)
    active, _ = running(group)
    staff = django_user_model.objects.create_superuser(username="staffer", password="pw-staff-1")
    admin = Client()
    admin.force_login(staff)
    owner.refresh_from_db()
    response = admin.post(
        f"/admin/auth/user/{owner.pk}/change/",
        {
            "username": owner.username,
            "is_active": "",  # unticked
            "date_joined_0": owner.date_joined.strftime("%Y-%m-%d"),
            "date_joined_1": owner.date_joined.strftime("%H:%M:%S"),
            "initial-date_joined_0": owner.date_joined.strftime("%Y-%m-%d"),
            "initial-date_joined_1": owner.date_joined.strftime("%H:%M:%S"),
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    owner.refresh_from_db()
    active.refresh_from_db()
    assert owner.is_active is False
    assert (active.state, active.outcome) == ("stopped", DEACTIVATED)


def socket_session(user) -> tuple[Client, list[tuple[bytes, bytes]]]:
    client = Client()
    client.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    return client, [
        (b"cookie", cookie.encode()),
        (b"origin", b"http://testserver"),
        (b"host", b"testserver"),
    ]


def test_signing_out_closes_that_sessions_sockets_and_deactivation_all_of_them(owner, stranger):
    group, theirs = household(owner), household(stranger)
    laptop, laptop_headers = socket_session(owner)
    _, phone_headers = socket_session(owner)
    _, their_headers = socket_session(stranger)

    def deactivate():
        owner.is_active = False
        owner.save()

    async def ping(group_id):
        await get_channel_layer().group_send(
            f"group-{group_id}", {"type": "garden.event", "event": PING}
        )

    async def run():
        sockets = {
            name: WebsocketCommunicator(application, f"/ws/groups/{g.pk}/", headers=headers)
            for name, g, headers in (
                ("laptop", group, laptop_headers),
                ("phone", group, phone_headers),
                ("theirs", theirs, their_headers),
            )
        }
        for socket in sockets.values():
            connected, _ = await socket.connect()
            assert connected
        out = {}
        signed_out = await sync_to_async(laptop.post)("/dashboard/logout/")
        out["logout"] = signed_out.status_code
        out["laptop"] = await sockets["laptop"].receive_output(timeout=5)
        await ping(group.pk)
        out["phone live"] = await sockets["phone"].receive_json_from(timeout=5) == PING
        await sync_to_async(deactivate)()
        out["phone"] = await sockets["phone"].receive_output(timeout=5)
        await ping(theirs.pk)
        out["theirs live"] = await sockets["theirs"].receive_json_from(timeout=5) == PING
        for socket in sockets.values():
            await socket.disconnect()
        return out

    out = async_to_sync(run)()
    assert out["logout"] in (200, 302)
    assert out["laptop"] == {"type": "websocket.close", "code": 4401}
    assert out["phone live"] is True  # another session of the same person stays open
    assert out["phone"] == {"type": "websocket.close", "code": 4401}
    assert out["theirs live"] is True


def test_a_new_password_closes_the_persons_sockets(owner):
    group = household(owner)
    _, headers = socket_session(owner)

    def new_password():
        owner.set_password("a-brand-new-passphrase")
        owner.save()

    async def run():
        socket = WebsocketCommunicator(application, f"/ws/groups/{group.pk}/", headers=headers)
        connected, _ = await socket.connect()
        assert connected
        await sync_to_async(new_password)()
        closed = await socket.receive_output(timeout=5)
        await socket.disconnect()
        return closed

    assert async_to_sync(run)() == {"type": "websocket.close", "code": 4401}
