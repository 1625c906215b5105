"""An agent's conversations through the API: listed newest first (by their last turn, or by
when they were started), started anew, renamed by their owner alone, refused by name."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from garden.api.serializers import first_words
from garden.models import Agent, Conversation, Message
from garden.services.accounts import scripted_account_for
from garden.services.agents import agent_create
from garden.services.conversations import (
    agent_conversation_open,
    conversation_create,
    message_append,
    text_block,
)
from tests.support.api import assert_refused

pytestmark = pytest.mark.django_db


def concierge(owner) -> Agent:
    return Agent.objects.get(owner=owner, builtin="concierge")


def said(conversation: Conversation, text: str, *, minutes_ago: int) -> Message:
    """The owner's turn ``text`` in ``conversation``, written ``minutes_ago``."""
    message = message_append(
        conversation_id=conversation.pk, speaker_kind="owner", content=[text_block(text)]
    )
    Message.objects.filter(pk=message.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes_ago)
    )
    return message


def started(owner, agent, *, minutes_ago: int, title: str = "") -> Conversation:
    made = conversation_create(owner=owner, agent=agent, title=title)
    Conversation.objects.filter(pk=made.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes_ago)
    )
    return made


def test_an_agents_conversations_are_listed_by_their_last_turn_newest_first(api, owner):
    agent = concierge(owner)
    old = started(owner, agent, minutes_ago=90, title="Budget")
    quiet = started(owner, agent, minutes_ago=60)
    empty = started(owner, agent, minutes_ago=5)
    said(
        quiet, "What did we spend on groceries in the whole of last month, roughly?", minutes_ago=50
    )
    said(old, "Let's look at the budget again.", minutes_ago=2)
    other = started(owner, Agent.objects.get(owner=owner, builtin="maker"), minutes_ago=1)

    listed = api.get("/api/conversations", {"agent": agent.pk}).json()
    # The old one was spoken in last; the empty one counts from when it was started.
    assert [c["id"] for c in listed] == [old.pk, empty.pk, quiet.pk]
    first, fresh, words = listed
    assert (first["title"], first["label"], first["last_seq"]) == ("Budget", "Budget", 1)
    assert (fresh["title"], fresh["first_words"], fresh["label"]) == ("", "", "New conversation")
    assert words["first_words"] == "What did we spend on groceries in the whole of last month…"
    assert words["label"] == words["first_words"]
    assert fresh["last_activity_at"] == fresh["created_at"]
    assert first["last_activity_at"] > fresh["last_activity_at"] > words["last_activity_at"]
    # Without the filter, every agent's, in the same order.
    assert [c["id"] for c in api.get("/api/conversations").json()] == [
        other.pk,
        old.pk,
        empty.pk,
        quiet.pk,
    ]


def test_a_new_conversation_is_listed_first_and_is_the_one_the_room_opens(api, owner):
    agent = concierge(owner)
    first = agent_conversation_open(owner=owner, agent=agent)
    said(first, "hello", minutes_ago=1)
    made = api.post("/api/conversations", {"agent": agent.pk})
    assert made.status_code == 201, made.content
    body = made.json()
    assert (body["agent"], body["title"], body["label"], body["last_seq"]) == (
        agent.pk,
        "",
        "New conversation",
        0,
    )
    assert api.get("/api/conversations", {"agent": agent.pk}).json()[0]["id"] == body["id"]
    assert agent_conversation_open(owner=owner, agent=agent).pk == body["id"]
    titled = api.post("/api/conversations", {"agent": agent.pk, "title": "  Taxes  "}).json()
    assert titled["title"] == "Taxes"


def test_renaming_keeps_the_title_trimmed_and_blank_makes_it_untitled(api, owner):
    conversation = started(owner, concierge(owner), minutes_ago=3)
    said(conversation, "Plan the  holiday\nbudget", minutes_ago=2)
    url = f"/api/conversations/{conversation.pk}"
    renamed = api.patch(url, {"title": "  Holiday budget "})
    assert renamed.status_code == 200, renamed.content
    assert (renamed.json()["title"], renamed.json()["label"]) == (
        "Holiday budget",
        "Holiday budget",
    )
    assert Conversation.objects.get(pk=conversation.pk).title == "Holiday budget"
    assert api.get(url).json()["title"] == "Holiday budget"
    untitled = api.patch(url, {"title": ""}).json()
    assert (untitled["title"], untitled["label"]) == ("", "Plan the holiday budget")


@pytest.mark.parametrize(
    ("title", "code"),
    [
        ("x" * 101, "TITLE_TOO_LONG"),
        ("two\nlines", "TITLE_INVALID"),
        ("tab\there", "TITLE_INVALID"),
    ],
)
def test_a_bad_title_is_refused_by_name_and_changes_nothing(api, owner, title, code):
    conversation = started(owner, concierge(owner), minutes_ago=1, title="Kept")
    url = f"/api/conversations/{conversation.pk}"
    assert_refused(api.patch(url, {"title": title}), 400, code, field="title")
    assert Conversation.objects.get(pk=conversation.pk).title == "Kept"
    before = Conversation.objects.count()
    made = api.post("/api/conversations", {"agent": concierge(owner).pk, "title": title})
    assert_refused(made, 400, code, field="title")
    assert Conversation.objects.count() == before


def test_a_title_of_a_hundred_characters_is_kept(api, owner):
    conversation = started(owner, concierge(owner), minutes_ago=1)
    renamed = api.patch(f"/api/conversations/{conversation.pk}", {"title": "y" * 100})
    assert renamed.status_code == 200 and renamed.json()["title"] == "y" * 100


def test_a_missing_title_and_a_bad_filter_are_refused(api, owner):
    conversation = started(owner, concierge(owner), minutes_ago=1)
    assert_refused(
        api.patch(f"/api/conversations/{conversation.pk}", {}), 400, "required", field="title"
    )
    assert_refused(api.get("/api/conversations", {"agent": "abc"}), 400, "invalid", field="agent")


def test_another_persons_conversations_are_not_found_nor_listed(api, owner, stranger):
    theirs = started(stranger, concierge(stranger), minutes_ago=1, title="Theirs")
    url = f"/api/conversations/{theirs.pk}"
    assert_refused(api.get(url), 404, "NOT_FOUND")
    assert_refused(api.patch(url, {"title": "Mine now"}), 404, "NOT_FOUND")
    assert Conversation.objects.get(pk=theirs.pk).title == "Theirs"
    assert api.get("/api/conversations", {"agent": concierge(stranger).pk}).json() == []
    # A group's thread is read through its group, not here.
    from groups.services.groups import group_create

    ledger = agent_create(
        owner=owner, handle="ledger", name="Ledger", model_account=scripted_account_for(owner=owner)
    )
    group = group_create(owner=owner, name="Team", members=[ledger.pk])
    thread = Conversation.objects.create(owner=owner, group=group)
    assert_refused(api.patch(f"/api/conversations/{thread.pk}", {"title": "x"}), 404)


def test_first_words_are_one_line_cut_at_a_word():
    assert first_words([{"type": "text", "text": "  Hello\n\nthere  "}]) == "Hello there"
    assert first_words([{"type": "artifact_ref", "artifact_id": 1}]) == ""
    assert first_words(None) == ""
    long = first_words([{"type": "text", "text": "word " * 40}], limit=20)
    assert long == "word word word word…" and len(long) <= 20
    assert first_words([{"type": "text", "text": "x" * 80}], limit=10) == "x" * 9 + "…"


def test_the_list_is_bounded_and_pages_back_by_last_activity(api, owner, client):
    agent = concierge(owner)
    threads = [started(owner, agent, minutes_ago=m) for m in range(1, 61)]
    first = api.get("/api/conversations", {"agent": agent.pk}).json()
    assert [c["id"] for c in first] == [t.pk for t in threads[:50]]
    page = api.get("/api/conversations", {"agent": agent.pk, "limit": 5}).json()
    after = api.get(
        "/api/conversations",
        {"agent": agent.pk, "limit": 20, "before": page[-1]["last_activity_at"]},
    ).json()
    assert [c["id"] for c in page + after] == [t.pk for t in threads[:25]]
    assert_refused(api.get("/api/conversations", {"limit": 201}), 400, "max_value", field="limit")
    assert_refused(api.get("/api/conversations", {"limit": 0}), 400, "min_value", field="limit")

    # The room lists the newest fifty, and the one it shows when that one is older.
    client.force_login(owner)
    oldest = threads[-1]
    page = client.get(f"/dashboard/agents/{agent.pk}/room/?conversation={oldest.pk}")
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count('class="thread-link"') == 51
    assert f'?conversation={oldest.pk}" aria-current="page"' in html
    assert "Older conversations are not listed here" in html
