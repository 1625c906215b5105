"""The per-process transcript: a step reads only the turns after those it holds, and what it
returns is always what a whole read of the thread returns."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from garden.models import Conversation, Message
from garden.services.conversations import message_append, text_block
from groups import thread_cache
from groups.services.requests import group_conversation_open, request_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def group(group_factory):
    return group_factory(concierge_rules=[], members={"ledger": []})


def whole(conversation_id: int) -> list[tuple]:
    return list(
        Message.objects.filter(conversation_id=conversation_id)
        .exclude(kind="activity")
        .order_by("seq")
        .values_list("pk", "seq", "content")
    )


def held(conversation_id: int, **kwargs) -> list[tuple]:
    return [
        (r.pk, r.seq, [b.text for b in r.content])
        for r in thread_cache.thread_rows(conversation_id, **kwargs)
    ]


def last_seq(conversation_id: int) -> int:
    return Conversation.objects.get(pk=conversation_id).last_seq


def say(conversation_id: int, text: str, *, kind: str = "turn") -> Message:
    return message_append(
        conversation_id=conversation_id,
        speaker_kind="owner",
        kind=kind,
        content=[text_block(text)],
    )


def test_a_second_read_fetches_only_the_new_turns_and_matches_a_whole_read(group):
    conversation = group_conversation_open(group=group)
    for i in range(30):
        say(conversation.pk, f"turn {i}", kind="activity" if i % 7 == 0 else "turn")
    first = held(conversation.pk)
    assert [(pk, seq) for pk, seq, _ in first] == [
        (pk, seq) for pk, seq, _ in whole(conversation.pk)
    ]
    say(conversation.pk, "one more")
    with CaptureQueriesContext(connection) as queries:
        second = held(conversation.pk)
    assert second[:-1] == first and second[-1][2] == ["one more"]
    [read] = queries.captured_queries
    # The read starts at the last turn held (to check it is the same row), not at the start.
    assert f'"seq" >= {first[-1][1]}' in read["sql"]


def test_a_thread_whose_last_held_turn_is_gone_is_read_afresh(group):
    conversation = group_conversation_open(group=group)
    say(conversation.pk, "kept")
    gone = say(conversation.pk, "gone")
    held(conversation.pk)
    gone.delete()
    say(conversation.pk, "after")
    assert [texts for _, _, texts in held(conversation.pk)] == [["kept"], ["after"]]


def test_the_cache_holds_at_most_its_bound(group, group_factory, settings):
    settings.GARDEN_TRANSCRIPT_CACHE_TURNS = 10
    threads = []
    for n in range(3):
        other = group_factory(concierge_rules=[], members={f"m{n}": []})
        conversation = group_conversation_open(group=other)
        for i in range(6):
            say(conversation.pk, f"{n}.{i}")
        threads.append(conversation.pk)
        assert len(thread_cache.thread_rows(conversation.pk)) == 6
    assert sum(len(held.rows) for held in thread_cache._threads.values()) <= 10
    big = group_conversation_open(group=group)
    for i in range(12):
        say(big.pk, f"big {i}")
    assert len(thread_cache.thread_rows(big.pk)) == 12, "larger than the bound: read whole"
    assert big.pk not in thread_cache._threads
    for pk in threads:
        assert [t for _, _, t in held(pk)] == [[c["text"]] for _, _, (c,) in whole(pk)]


def test_the_cache_holds_at_most_its_bound_in_bytes(group, group_factory, settings):
    """A few threads of long turns cannot fill a worker: the bytes held are bounded too, the
    least recently used thread going first, and a thread larger than the bound is read whole
    each time, never kept."""
    settings.GARDEN_TRANSCRIPT_CACHE_BYTES = 60_000
    long = "x" * 9_000
    threads = []
    for n in range(3):
        other = group_factory(concierge_rules=[], members={f"m{n}": []})
        conversation = group_conversation_open(group=other)
        for i in range(2):
            say(conversation.pk, f"{n}.{i} {long}")
        threads.append(conversation.pk)
        assert len(thread_cache.thread_rows(conversation.pk)) == 2
        held_bytes = sum(held.size for held in thread_cache._threads.values())
        assert held_bytes <= 60_000
    # Three threads of about 18 KB each fit; a fourth pushes out the least recently used.
    assert set(thread_cache._threads) == set(threads)
    fourth = group_conversation_open(group=group_factory(concierge_rules=[], members={}))
    for i in range(2):
        say(fourth.pk, f"4.{i} {long}")
    thread_cache.thread_rows(fourth.pk)
    assert threads[0] not in thread_cache._threads and fourth.pk in thread_cache._threads
    big = group_conversation_open(group=group)
    for i in range(8):
        say(big.pk, f"big {i} {long}")
    assert len(thread_cache.thread_rows(big.pk)) == 8, "larger than the bound: read whole"
    assert big.pk not in thread_cache._threads
    assert sum(held.size for held in thread_cache._threads.values()) <= 60_000
    for pk in [*threads, fourth.pk]:
        assert [t for _, _, t in held(pk)] == [[c["text"]] for _, _, (c,) in whole(pk)]


def test_a_queued_owner_message_is_placed_where_its_request_starts(group):
    first = request_create(group=group, text="first")
    second = request_create(group=group, text="second")  # queued behind the first
    ledger = group.memberships.get(agent__handle="ledger").agent
    message_append(
        conversation_id=first.conversation_id,
        speaker_kind="agent",
        speaker_agent=ledger,
        content=[text_block("working on first")],
        request_id=first.pk,
    )
    turns = thread_cache.transcript(
        first.conversation_id, up_to_request=first.pk, handles={ledger.pk: "ledger"}
    )
    assert [(t.content[0].text, t.speaker_handle) for t in turns] == [
        ("first", None),
        ("working on first", "ledger"),
    ]
    turns = thread_cache.transcript(second.conversation_id, up_to_request=second.pk, handles={})
    assert [t.content[0].text for t in turns] == ["first", "working on first", "second"]
    assert [t.seq for t in turns] == [1, 2, 3]
    assert turns[1].speaker_handle == "ledger", "a speaker outside the handles given is read"


def test_a_thread_with_nothing_past_what_is_held_is_not_read_again(group):
    conversation = group_conversation_open(group=group)
    say(conversation.pk, "one")
    say(conversation.pk, "working", kind="activity")
    first = held(conversation.pk, last_seq=last_seq(conversation.pk))
    with CaptureQueriesContext(connection) as queries:
        again = held(conversation.pk, last_seq=last_seq(conversation.pk))
    assert again == first and [t for _, _, t in first] == [["one"]]
    assert len(queries.captured_queries) == 1, "only the test's own read of last_seq"
    say(conversation.pk, "two")
    assert [t for _, _, t in held(conversation.pk, last_seq=last_seq(conversation.pk))] == [
        ["one"],
        ["two"],
    ]


def test_turns_a_step_committed_are_held_at_once_only_when_they_follow_what_is_held(group):
    conversation = group_conversation_open(group=group)
    say(conversation.pk, "one")
    held(conversation.pk, last_seq=last_seq(conversation.pk))
    mine = say(conversation.pk, "mine")
    thread_cache.remember(conversation.pk, [mine])
    seen_to = last_seq(conversation.pk)
    with CaptureQueriesContext(connection) as queries:
        rows = held(conversation.pk, last_seq=seen_to)
    assert [t for _, _, t in rows] == [["one"], ["mine"]] and not queries.captured_queries
    # Someone else's turn came between: the step's own turns do not follow what is held.
    say(conversation.pk, "theirs")
    later = say(conversation.pk, "mine again")
    thread_cache.remember(conversation.pk, [later])
    assert [t for _, _, t in held(conversation.pk, last_seq=last_seq(conversation.pk))] == [
        ["one"],
        ["mine"],
        ["theirs"],
        ["mine again"],
    ]
    assert [(pk, seq) for pk, seq, _ in held(conversation.pk)] == [
        (pk, seq) for pk, seq, _ in whole(conversation.pk)
    ]


def test_a_transcript_built_from_the_turns_since_the_last_is_the_one_built_whole(group):
    first = request_create(group=group, text="first")
    ledger = group.memberships.get(agent__handle="ledger").agent
    handles = {ledger.pk: "ledger"}
    conversation_id = first.conversation_id

    def built(request) -> list:
        return thread_cache.transcript(conversation_id, up_to_request=request.pk, handles=handles)

    def afresh(request) -> list:
        thread_cache.forget()
        return built(request)

    def turn(text: str, request, kind: str = "turn") -> None:
        message_append(
            conversation_id=conversation_id,
            speaker_kind="agent",
            speaker_agent=ledger,
            content=[text_block(text)],
            request_id=request.pk if request else None,
            kind=kind,
        )

    built(first)
    turn("working on first", first)
    second = request_create(group=group, text="second")  # queued behind the first
    turn("still on first", first)
    turn("a line", first, kind="activity")
    assert built(first) == afresh(first)
    assert [t.content[0].text for t in built(second)] == [
        "first",
        "working on first",
        "still on first",
        "second",
    ]
    turn("on second", second)
    turn("a note of no request", None)
    incremental = built(second)
    assert incremental == afresh(second)
    # A late turn of the earlier request sorts before turns already built: built afresh.
    turn("late, on first", first)
    assert built(second) == afresh(second)
    assert [t.seq for t in built(second)] == list(range(1, 8))
