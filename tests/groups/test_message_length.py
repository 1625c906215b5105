"""A message longer than MESSAGE_MAX_CHARS is refused by name (MESSAGE_TOO_LONG), in a sentence
that gives the limit, the length and what to do instead, and writes nothing: in a group's room
and an agent's, as JSON and as a multipart form."""

from __future__ import annotations

import pytest

from garden.models import Agent, Message
from garden.services.conversations import agent_conversation_open
from groups.models import MESSAGE_MAX_CHARS, GroupRequest
from tests.support.api import assert_refused

pytestmark = pytest.mark.django_db

TOO_LONG = (
    "A message can be at most 20,000 characters; this one has 276,000. Shorten it, or attach "
    "the text as a file."
)


@pytest.fixture
def group(group_factory):
    return group_factory(concierge_rules=[], members={"ledger": []})


def test_the_limit_is_twenty_thousand_characters_and_a_message_at_it_is_taken(api, group):
    assert MESSAGE_MAX_CHARS == 20_000
    # Spaces around it are trimmed before it is counted.
    posted = api.post(f"/api/groups/{group.pk}/messages", {"text": f"  {'x' * 20_000}  "})
    assert posted.status_code == 202, posted.content[:300]


@pytest.mark.parametrize("form", [False, True], ids=["json", "multipart"])
def test_a_long_paste_is_refused_by_name_and_writes_nothing(api, group, form):
    before = (Message.objects.count(), GroupRequest.objects.count())
    url = f"/api/groups/{group.pk}/messages"
    data = {"text": "x" * 276_000}
    response = (
        api.client.post(url, data, format="multipart", HTTP_X_CSRFTOKEN=api.token)
        if form
        else api.post(url, data)
    )
    body = assert_refused(response, 400, "MESSAGE_TOO_LONG", field="text")
    assert [e["message"] for e in body["errors"]] == [TOO_LONG]
    assert (Message.objects.count(), GroupRequest.objects.count()) == before


def test_an_agents_room_refuses_it_the_same_way(api, owner):
    concierge = Agent.objects.get(owner=owner, builtin="concierge")
    conversation = agent_conversation_open(owner=owner, agent=concierge)
    response = api.post(
        f"/api/conversations/{conversation.pk}/messages", {"text": "y" * (MESSAGE_MAX_CHARS + 1)}
    )
    body = assert_refused(response, 400, "MESSAGE_TOO_LONG", field="text")
    assert "this one has 20,001" in body["errors"][0]["message"]
