"""Search (GET /api/search, groups/search.py): the text of the turns a person can read — their
groups' threads and their agents' 1:1 conversations, written by the loop itself — newest first,
each with the room's address at the turn; never another owner's, a deleted group's or a removed
agent's; named refusals for a query it cannot read; on PostgreSQL, answered from the index."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from garden.models import Conversation, Message
from garden.services.agents import agent_create, agent_remove
from garden.services.conversations import message_append, text_block
from groups.search import (
    LIMIT_MAX,
    TERMS_MAX,
    search_query_check,
    snippet,
    turn_search_rows,
)
from groups.services.groups import group_delete
from groups.services.requests import conversation_request_create, request_create
from tests.groups.conftest import make_group, scripted
from tests.support.api import assert_refused, sign_in
from tests.support.driving import drive

pytestmark = pytest.mark.django_db

ANSWER = "The compost ledger balances: forty barrows of leaf mould this autumn."


def team(owner, name="Allotment"):
    return make_group(
        owner,
        name=name,
        concierge_rules=[],
        members={"ledger": []},
        concierge_default=ANSWER,
    )


def asked(group, text):
    """``text`` posted to ``group`` and stepped to its end, as the room's POST would run it."""
    request = request_create(group=group, text=text)
    drive(request)
    return request


def one_to_one(owner, text, handle="digger", default=ANSWER):
    agent = agent_create(
        owner=owner,
        handle=handle,
        name=handle.title(),
        model_account=scripted(owner, handle, [], default),
    )
    conversation = Conversation.objects.create(owner=owner, agent=agent)
    drive(conversation_request_create(owner=owner, conversation=conversation, text=text))
    return agent, conversation


def search(api, q, **params):
    response = api.get("/api/search", {"q": q, **params})
    assert response.status_code == 200, response.content
    return response.json()


def test_a_group_turn_is_found_with_its_room_at_the_turn(api, owner):
    group = team(owner)
    asked(group, "How is the compost doing?")
    body = search(api, "compost")
    assert body["q"] == "compost"
    said = [(r["speaker"]["kind"], r["seq"]) for r in body["results"]]
    # Newest first: the coordinator's answer, then the owner's question.
    assert said[-1] == ("owner", 1) and said[0][0] == "agent", said
    answer = body["results"][0]
    turn = Message.objects.get(pk=answer["id"])
    assert answer["conversation"] == turn.conversation_id
    assert answer["group"] == group.pk and answer["agent"] is None
    assert answer["room"] == "Allotment"
    assert answer["room_url"] == (
        f"/dashboard/groups/{group.pk}/?conversation={turn.conversation_id}#turn-{turn.seq}"
    )
    assert answer["speaker"]["name"] == "Concierge"
    assert "compost ledger" in answer["snippet"]
    assert answer["created_at"]
    assert body["next_before"] is None


def test_a_one_to_one_turn_is_found_with_the_agents_room(api, owner):
    agent, conversation = one_to_one(owner, "Tell me about the barrows")
    body = search(api, "BARROWS")  # any case
    assert [r["speaker"]["kind"] for r in body["results"]] == ["agent", "owner"]
    hit = body["results"][0]
    assert hit["agent"] == agent.pk and hit["group"] is None and hit["room"] == "Digger"
    assert hit["room_url"].startswith(
        f"/dashboard/agents/{agent.pk}/room/?conversation={conversation.pk}#turn-"
    )


def test_every_word_must_appear_and_each_word_matches_as_the_start_of_a_word(api, owner):
    asked(team(owner), "Count the barrows")
    assert {r["speaker"]["kind"] for r in search(api, "leaf barrow")["results"]} == {"agent"}
    assert search(api, "comp ledg")["results"]  # prefixes
    assert search(api, "leaf tulips")["results"] == []


def test_another_owners_turns_are_never_found(api, owner, stranger):
    asked(team(stranger, "Theirs"), "their compost secret")
    one_to_one(stranger, "their compost secret 1:1")
    assert search(api, "compost")["results"] == []
    asked(team(owner), "our compost")
    theirs = search(sign_in(stranger), "compost")["results"]
    assert theirs and {r["room"] for r in theirs} == {"Theirs", "Digger"}
    ours = search(api, "compost")["results"]
    assert ours and {r["room"] for r in ours} == {"Allotment"}
    # A page marker of theirs shows nothing of theirs either.
    assert search(api, "secret", before=max(r["id"] for r in theirs) + 1)["results"] == []


def test_a_deleted_group_and_a_removed_agent_are_not_searched(api, owner):
    group = team(owner)
    asked(group, "compost in the group")
    agent, _ = one_to_one(owner, "compost 1:1")
    assert {r["room"] for r in search(api, "compost")["results"]} == {"Allotment", "Digger"}
    group_delete(group=group)
    agent_remove(agent=agent)
    assert search(api, "compost")["results"] == []


def test_tool_calls_and_results_are_not_searched_but_every_text_block_is(api, owner):
    group = team(owner)
    conversation = Conversation.objects.create(owner=owner, group=group)
    message_append(
        conversation_id=conversation.pk,
        speaker_kind=Message.SpeakerKind.GARDEN,
        content=[
            {"type": "tool_call", "id": "c1", "name": "http.fetch", "arguments": {"q": "rhubarb"}},
            {"type": "tool_result", "call_id": "c1", "content": "rhubarb", "is_error": False},
        ],
    )
    assert search(api, "rhubarb")["results"] == []
    message_append(
        conversation_id=conversation.pk,
        speaker_kind=Message.SpeakerKind.GARDEN,
        kind=Message.Kind.NOTICE,
        content=[text_block("first block"), text_block("Rhubarb forced under pots")],
    )
    (hit,) = search(api, "rhubarb")["results"]
    assert hit["kind"] == "notice" and hit["snippet"] == "first block Rhubarb forced under pots"


def test_pages_go_newest_first_with_before(api, owner):
    group = team(owner)
    for n in range(3):
        asked(group, f"compost batch {n}")
    everything = [r["id"] for r in search(api, "compost", limit=50)["results"]]
    assert everything == sorted(everything, reverse=True) and len(everything) == 6
    first = search(api, "compost", limit=4)
    assert [r["id"] for r in first["results"]] == everything[:4]
    assert first["next_before"] == everything[3]
    rest = search(api, "compost", limit=4, before=first["next_before"])
    assert [r["id"] for r in rest["results"]] == everything[4:] and rest["next_before"] is None


@pytest.mark.parametrize(
    ("params", "field", "code"),
    [
        ({}, "q", "SEARCH_QUERY_INVALID"),
        ({"q": "   "}, "q", "SEARCH_QUERY_INVALID"),
        ({"q": "&!:*()"}, "q", "SEARCH_QUERY_INVALID"),
        ({"q": "x" * 201}, "q", "SEARCH_QUERY_INVALID"),
        ({"q": " ".join(f"w{n}" for n in range(TERMS_MAX + 1))}, "q", "SEARCH_QUERY_INVALID"),
        ({"q": "compost", "limit": 51}, "limit", "max_value"),
        ({"q": "compost", "limit": "many"}, "limit", "invalid"),
        ({"q": "compost", "before": 0}, "before", "min_value"),
    ],
)
def test_a_query_search_cannot_read_is_a_named_400(api, params, field, code):
    assert_refused(api.get("/api/search", params), 400, code, field=field)


def test_a_word_is_what_was_typed_between_spaces_without_the_punctuation_around_it(api, owner):
    group = team(owner)
    conversation = Conversation.objects.create(owner=owner, group=group)
    message_append(
        conversation_id=conversation.pk,
        speaker_kind=Message.SpeakerKind.OWNER,
        content=[text_block("Write to bob@example.com about the e-mail: 50% off 2.5 kg, xzy.")],
    )
    for q in ("bob@example.com", "(e-mail)", "mail", "50%", "2.5", '"xzy"', "bob@example.com."):
        assert len(search(api, q)["results"]) == 1, q
    # LIKE's wildcards are only text on SQLite, as tsquery's operators are on PostgreSQL.
    for q in ("x_y", "x%y", "bob@example.org"):
        assert search(api, q)["results"] == [], q


def test_tsquery_syntax_in_a_query_is_only_words(api, owner):
    asked(team(owner), "compost")
    assert search(api, "compost:* | !leaf & (")["results"]
    assert search(api, "'; DROP TABLE garden_message; --")["results"] == []


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(q=st.text(max_size=220))
@example(q="a\x00b")
@example(q="it's a\\ b' ':*|& 100%_off")
@example(q="🌱 компост ﬁsh ǅ")
def test_any_query_is_searched_or_refused_by_name(api, settings, q):
    """Whatever is typed (tsquery syntax, LIKE wildcards, NUL, any script), the answer is a page
    of results or SEARCH_QUERY_INVALID, never a database error."""
    settings.GARDEN_THROTTLE_RATES = {**settings.GARDEN_THROTTLE_RATES, "search": ""}
    response = api.get("/api/search", {"q": q})
    if response.status_code == 400:
        assert response.json()["code"] == "SEARCH_QUERY_INVALID"
    else:
        assert response.status_code == 200, response.content
        assert response.json()["results"] == []


def test_signed_out_is_refused(client):
    assert client.get("/api/search", {"q": "compost"}).status_code == 403


def test_a_snippet_is_cut_around_the_first_word_found():
    text = " ".join(f"word{n}" for n in range(100)) + " compost " + "tail " * 50
    cut = snippet(text, ("compost",))
    assert "compost" in cut and cut.startswith("…") and cut.endswith("…")
    assert len(cut) <= 162
    assert snippet("short\n\ntext", ("x",)) == "short text"
    assert snippet("a " * 200, ("zzz",)).startswith("a a")


@pytest.mark.postgres
def test_postgresql_answers_a_search_from_the_text_index(owner):
    """The query's expression is the index's: in a room of a few thousand turns, of which one
    holds the word, the plan of the search reads message_text_search (no setting forced)."""
    group = team(owner)
    asked(group, "compost")
    conversation = Conversation.objects.get(group=group)
    filler = [
        Message(
            conversation=conversation,
            seq=conversation.last_seq + n,
            speaker_kind=Message.SpeakerKind.OWNER,
            content=[text_block(f"row {n} of the seed beds, weeded and watered")],
        )
        for n in range(1, 3001)
    ]
    Message.objects.bulk_create(filler)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE garden_message")
    query = search_query_check(q="compost")
    plan = turn_search_rows(owner=owner, query=query)[: LIMIT_MAX + 1].explain()
    assert "message_text_search" in plan, plan
    assert len(turn_search_rows(owner=owner, query=query)) == 2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_migrating_again_rebuilds_an_index_a_failed_build_left_invalid():
    """CREATE INDEX CONCURRENTLY that fails part-way leaves the index invalid under its name;
    the migration run again drops it and builds it (IF NOT EXISTS alone would keep it)."""
    migration = importlib.import_module("garden.migrations.0019_message_text_search")

    def valid() -> bool | None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = %s",
                [migration.INDEX],
            )
            row = cursor.fetchone()
        return row[0] if row else None

    assert valid() is True
    with connection.cursor() as cursor:  # what a build cut short leaves
        cursor.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
            [migration.INDEX],
        )
    assert valid() is False
    with connection.schema_editor(atomic=False) as editor:
        migration.create_index(None, editor)
    assert valid() is True
    with connection.schema_editor(atomic=False) as editor:
        migration.drop_index(None, editor)
    assert valid() is None
    with connection.schema_editor(atomic=False) as editor:
        migration.create_index(None, editor)
    assert valid() is True


@pytest.mark.postgres
def test_a_short_word_is_found_whole_never_as_the_start_of_longer_words(api, owner):
    """Below PREFIX_MIN_CHARS a word is looked for whole: "co" is not the start of every
    "compost" in the index, "com" is."""
    group = team(owner)
    asked(group, "How is the compost doing? Ask co about it.")
    found = {r["seq"] for r in search(api, "co")["results"]}
    assert found == {1}, found  # only the owner's turn says "co"
    assert len(search(api, "com")["results"]) >= 2


def test_searching_has_a_rate_of_its_own(api, owner, settings):
    settings.GARDEN_THROTTLE_RATES = {**settings.GARDEN_THROTTLE_RATES, "search": "2/min"}
    asked(team(owner), "compost")
    assert [api.get("/api/search", {"q": "compost"}).status_code for _ in range(2)] == [200, 200]
    body = assert_refused(api.get("/api/search", {"q": "compost"}), 429, "THROTTLED")
    assert "search" in body["message"]
    # Reading the rest of the site is not held back by it.
    assert api.get("/api/groups").status_code == 200
