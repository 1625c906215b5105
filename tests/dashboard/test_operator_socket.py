"""The operator-messages admin's websocket (ws/operator/): staff who may read that admin receive
each tend.finished the gardener sends; anyone else is closed with 4403."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser, Permission

from config.routing import websocket_urlpatterns
from operator_messages import emit_tend_survey
from operator_messages.driver import OPERATOR_CHANNEL, run_goal
from tests.operator_messages.helpers import start

pytestmark = pytest.mark.django_db(transaction=True)

PATH = "/ws/operator/"


def communicator_for(user) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), PATH)
    communicator.scope["user"] = user
    return communicator


def a_tend_run(note: str | None) -> dict:
    goal, _, _ = start("tend")

    def work(active):
        if note is not None:
            assert emit_tend_survey(note).ok

    return run_goal(goal, "gardener", work).tend_finished


def test_staff_receive_each_tend_run_that_finishes_and_nothing_else(runtime, django_user_model):
    staff = django_user_model.objects.create_superuser(username="operator", password="pw-op-123")

    async def run():
        communicator = communicator_for(staff)
        connected, _ = await communicator.connect()
        assert connected
        # Only what the admin shows is forwarded from the gardener's channel.
        await get_channel_layer().group_send(
            OPERATOR_CHANNEL, {"type": "garden.event", "event": {"type": "other"}}
        )
        with_note = await database_sync_to_async(a_tend_run)("One approval has waited.")
        first = await communicator.receive_json_from(timeout=5)
        without = await database_sync_to_async(a_tend_run)(None)
        second = await communicator.receive_json_from(timeout=5)
        await communicator.disconnect()
        return with_note, first, without, second

    with_note, first, without, second = async_to_sync(run)()
    assert first == with_note
    assert first["operator_note_written"] is True
    assert first["operator_note_path"].startswith(str(runtime / "inbox"))
    assert second == without
    assert (second["operator_note_written"], second["operator_note_path"]) == (False, None)


@pytest.mark.parametrize("who", ["owner", "staff without the permission", "anonymous"])
def test_anyone_else_is_closed_with_4403(django_user_model, owner, who):
    user = {
        "owner": owner,
        "anonymous": AnonymousUser(),
        "staff without the permission": django_user_model.objects.create_user(
            username="staff", password="pw-staff-123", is_staff=True
        ),
    }[who]

    async def run():
        communicator = communicator_for(user)
        await communicator.connect()
        output = await communicator.receive_output(timeout=2)
        await communicator.disconnect()
        return output

    assert async_to_sync(run)() == {"type": "websocket.close", "code": 4403}


def test_staff_with_the_view_permission_connect(django_user_model):
    staff = django_user_model.objects.create_user(
        username="viewer", password="pw-viewer-123", is_staff=True
    )
    staff.user_permissions.add(Permission.objects.get(codename="view_operatormessagerun"))

    async def run():
        communicator = communicator_for(staff)
        connected, _ = await communicator.connect()
        quiet = await communicator.receive_nothing(timeout=0.3)
        await communicator.disconnect()
        return connected, quiet

    assert async_to_sync(run)() == (True, True)
