"""An agent's several conversations share its room's loop but not their threads: a message sent
in one is answered in that one, from that one's turns alone, and Stop in one stops only its
own request."""

from __future__ import annotations

import pytest

from garden.models import Conversation, Message
from groups.models import GroupRequest
from tests.groups.helpers import answer_of, drive
from tests.groups.test_one_to_one import http_agent, transcript
from tests.support.providers import openai_reply

pytestmark = pytest.mark.django_db


def thread_rows(conversation: Conversation) -> list[tuple]:
    return list(
        Message.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("pk", "seq", "content", "request_id")
    )


def posted(api, conversation: Conversation, text: str) -> GroupRequest:
    answer = api.post(f"/api/conversations/{conversation.pk}/messages", {"text": text})
    assert answer.status_code == 202, answer.content
    return GroupRequest.objects.get(pk=answer.json()["request"]["id"])


def test_a_message_in_the_second_conversation_is_answered_there_alone(api, owner, provider_server):
    provider_server.reply(200, openai_reply("Rent is 1,200."))
    provider_server.reply(200, openai_reply("Groceries were 410."))
    ledger = http_agent(owner, provider_server)
    first = Conversation.objects.get(
        pk=api.post("/api/conversations", {"agent": ledger.pk}).json()["id"]
    )
    drive(posted(api, first, "What is the rent?"))
    before = thread_rows(first)

    second = Conversation.objects.get(
        pk=api.post("/api/conversations", {"agent": ledger.pk}).json()["id"]
    )
    request = posted(api, second, "And groceries?")
    drive(request)

    assert (request.state, request.conversation_id) == ("completed", second.pk)
    assert answer_of(request).conversation_id == second.pk
    assert transcript(second) == [
        ("owner", None, "turn", "And groceries?"),
        ("agent", "ledger", "turn", "Groceries were 410."),
    ]
    # The first thread is as it was, turn for turn, and the model never saw it again.
    assert thread_rows(first) == before
    assert transcript(first) == [
        ("owner", None, "turn", "What is the rent?"),
        ("agent", "ledger", "turn", "Rent is 1,200."),
    ]
    sent = str(provider_server.requests[1].body["messages"])
    assert "And groceries?" in sent and "rent" not in sent.lower()
    # Both are the same agent's room: one loop, two threads.
    assert request.group_id == GroupRequest.objects.get(conversation=first).group_id
    listed = api.get("/api/conversations", {"agent": ledger.pk}).json()
    assert [c["id"] for c in listed] == [second.pk, first.pk]
    assert [c["label"] for c in listed] == ["And groceries?", "What is the rent?"]


def test_stop_in_one_conversation_leaves_the_others_request_running(api, owner, provider_server):
    ledger = http_agent(owner, provider_server)
    first, second = (
        Conversation.objects.create(owner=owner, agent=ledger),
        Conversation.objects.create(owner=owner, agent=ledger),
    )
    running = posted(api, first, "Long sum, please.")
    drive(running, "running")
    waiting = posted(api, second, "A quick one.")

    # Nothing of the second is running yet: its Stop stops nothing of the first's.
    stopped = api.post(f"/api/conversations/{second.pk}/stop").json()
    assert stopped == {"stopped": None}
    running.refresh_from_db()
    waiting.refresh_from_db()
    assert (running.state, waiting.state) == ("running", "queued")

    stopped = api.post(f"/api/conversations/{first.pk}/stop").json()
    assert stopped["stopped"]["id"] == running.pk
    running.refresh_from_db()
    assert running.state == "stopped"
    # The second conversation's message is next, in its own thread.
    provider_server.reply(200, openai_reply("Quick: 7."))
    drive(waiting)
    assert waiting.state == "completed"
    assert answer_of(waiting).conversation_id == second.pk
    assert answer_of(waiting).text == "Quick: 7."
