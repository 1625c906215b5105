"""In the room, a member whose model server is down is said to be unreachable, in the words an
account's Test uses (garden/providers/types.py), not as a wrong key."""

from __future__ import annotations

import pytest

from garden.models import Agent, Message
from groups.models import CallReservation
from groups.services.requests import request_create
from tests.garden.providers.httpserver import unused_port
from tests.support.driving import drive

pytestmark = pytest.mark.django_db


def test_in_the_room_a_member_whose_server_is_down_is_said_so_in_the_same_words(
    owner, group_factory, loopback_providers, settings
):
    settings.GARDEN_PROVIDER_RETRY_ATTEMPTS = 1
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Done."},
            {"reply": {"tool_calls": [{"name": "group.ask", "arguments": {
                "member": "ledger", "request": "Figures?"}}]}},
        ],
        members={"ledger": []},
    )  # fmt: skip
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    account = ledger.model_account
    account.provider, account.model = "openai", "m"
    account.base_url = f"http://127.0.0.1:{unused_port()}/v1"
    account.save()
    request = request_create(group=group, text="Go.")
    drive(request, limit=40)
    notice = Message.objects.get(request=request, kind="notice")
    text = notice.content[0]["text"]
    assert text.startswith("@ledger's contribution did not come: its model call failed")
    assert "PROVIDER_UNREACHABLE: Nothing is answering at the base URL" in text
    released = CallReservation.objects.get(request=request, agent=ledger)
    assert (released.status, released.reason) == ("released", "PROVIDER_UNREACHABLE")
