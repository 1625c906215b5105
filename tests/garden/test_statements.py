"""garden's critical writes (garden/statements.py): the seqs taken and the turns written, with a
caller's row update described (never SQL handed in). Each statement's ORM reference and its
PostgreSQL fast path, run against the same starting rows, write the same rows (every concrete
field, so a field added to Message is checked too) and refuse the same cases. On SQLite only the
reference runs, against the same expected rows."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from garden import statements
from garden.models import Agent, Conversation, Message
from garden.services.conversations import conversation_create, message_append, text_block
from garden.statements import RowUpdate
from tests.support.rows import fields_of, row

pytestmark = pytest.mark.django_db


@pytest.fixture
def concierge(owner) -> Agent:
    return Agent.objects.get(owner=owner, handle="concierge")


@pytest.fixture
def thread(owner, concierge) -> Conversation:
    """A thread with one turn (seq 1) and 7 bytes counted."""
    conversation = conversation_create(owner=owner, agent=concierge)
    message_append(conversation_id=conversation.pk, speaker_kind="owner", content=[])
    Conversation.objects.filter(pk=conversation.pk).update(stored_bytes=7)
    return conversation


def test_each_statement_dispatches_to_the_fast_path_on_postgresql_only(monkeypatch):
    taken = []
    for name in ("take_seqs", "insert_turns"):
        for form in ("orm", "pg"):
            monkeypatch.setattr(
                statements, f"{name}_{form}", lambda *a, _f=form, **k: taken.append(_f)
            )
    statements.take_seqs(conversation_id=1, count=1)
    statements.insert_turns(conversation_id=1, messages=[], stored=0)
    fast = "pg" if connection.vendor == "postgresql" else "orm"
    assert taken == [fast, fast]


def test_seqs_are_taken_with_the_bytes_counted(thread, path):
    before = row(Conversation, thread.pk)
    last = getattr(statements, f"take_seqs_{path}")(conversation_id=thread.pk, count=3, stored=40)
    assert last == 4
    assert row(Conversation, thread.pk) == {**before, "last_seq": 4, "stored_bytes": 47}


def test_seqs_of_a_thread_that_is_gone_are_refused(path):
    with pytest.raises(Conversation.DoesNotExist):
        getattr(statements, f"take_seqs_{path}")(conversation_id=0, count=1)


def test_turns_are_written_in_order_with_the_callers_row_update(thread, concierge, path):
    first = Message.objects.get(conversation=thread, seq=1)
    turns = [
        Message(
            speaker_kind="agent",
            speaker_agent=concierge,
            kind=Message.Kind.COORDINATION,
            content=[text_block("Ledger, the rent?")],
            addressed_agent=concierge,
            in_reply_to=first,
            step=3,
        ),
        Message(
            speaker_kind="garden",
            kind=Message.Kind.NOTICE,
            content=[{"type": "tool_result", "call_id": "c1", "content": "ok", "is_error": False}],
            reply_to_call_id="c1",
        ),
    ]
    update = RowUpdate(model=Agent, pk=concierge.pk, values={"instructions": "Count twice."})
    before_thread, before_agent = row(Conversation, thread.pk), row(Agent, concierge.pk)

    with transaction.atomic():
        getattr(statements, f"insert_turns_{path}")(
            conversation_id=thread.pk, messages=turns, stored=100, also=update
        )

    assert row(Agent, concierge.pk) == {**before_agent, "instructions": "Count twice."}
    assert row(Conversation, thread.pk) == {**before_thread, "last_seq": 3, "stored_bytes": 107}
    written = list(Message.objects.filter(conversation=thread, seq__gt=1).order_by("seq"))
    assert [m.pk for m in written] == [m.pk for m in turns] and all(m.pk for m in turns)
    for turn in turns:
        assert fields_of(turn) == row(Message, turn.pk), "what it sets is the row written"
    stored = [row(Message, m.pk) for m in written]
    for values in stored:
        assert values.pop("id") and values.pop("created_at")
    assert stored == [
        {
            "conversation_id": thread.pk,
            "seq": 2,
            "speaker_kind": "agent",
            "speaker_agent_id": concierge.pk,
            "author_id": None,
            "kind": "coordination",
            "content": [text_block("Ledger, the rent?")],
            "in_reply_to_id": first.pk,
            "request_id": None,
            "addressed_agent_id": concierge.pk,
            "reply_to_call_id": "",
            "step": 3,
            "stopped_at": None,
        },
        {
            "conversation_id": thread.pk,
            "seq": 3,
            "speaker_kind": "garden",
            "speaker_agent_id": None,
            "author_id": None,
            "kind": "notice",
            "content": [
                {"type": "tool_result", "call_id": "c1", "content": "ok", "is_error": False}
            ],
            "in_reply_to_id": None,
            "request_id": None,
            "addressed_agent_id": None,
            "reply_to_call_id": "c1",
            "step": None,
            "stopped_at": None,
        },
    ]


def test_a_seq_clash_is_refused_and_nothing_is_written(thread, concierge, path):
    """A thread whose count fell behind its turns: the next seq is taken, so the insert
    fails and the caller's transaction keeps nothing (the row update with it)."""
    Conversation.objects.filter(pk=thread.pk).update(last_seq=0)
    before_thread, before_agent = row(Conversation, thread.pk), row(Agent, concierge.pk)
    update = RowUpdate(model=Agent, pk=concierge.pk, values={"instructions": "Never."})
    with pytest.raises(IntegrityError), transaction.atomic():
        getattr(statements, f"insert_turns_{path}")(
            conversation_id=thread.pk,
            messages=[Message(speaker_kind="owner", content=[])],
            stored=5,
            also=update,
        )
    assert row(Conversation, thread.pk) == before_thread
    assert row(Agent, concierge.pk) == before_agent
    assert Message.objects.filter(conversation=thread).count() == 1


def test_turns_of_a_thread_that_is_gone_are_refused(concierge, path):
    before = row(Agent, concierge.pk)
    update = RowUpdate(model=Agent, pk=concierge.pk, values={"instructions": "Never."})
    with pytest.raises(Conversation.DoesNotExist), transaction.atomic():
        getattr(statements, f"insert_turns_{path}")(
            conversation_id=0,
            messages=[Message(speaker_kind="owner", content=[])],
            stored=0,
            also=update,
        )
    assert row(Agent, concierge.pk) == before


def test_a_row_update_alone_writes_what_save_would(concierge):
    concierge.instructions = "Be brief."
    update = RowUpdate.of(concierge, ["instructions"])
    assert update == RowUpdate(model=Agent, pk=concierge.pk, values={"instructions": "Be brief."})
    assert statements.row_update(update) == 1
    assert Agent.objects.get(pk=concierge.pk).instructions == "Be brief."
    assert statements.row_update(RowUpdate(model=Agent, pk=0, values={"name": "x"})) == 0


def test_the_fast_path_names_every_field_of_a_turn():
    """A field added to Message must be named in the fast path's INSERT, which the ORM's
    bulk INSERT writes anyway (only the id and the seq come from elsewhere)."""
    names = [f.name for f in Message._meta.concrete_fields if f.name not in ("id", "seq")]
    assert sorted(statements.TURN_INSERTED) == sorted(names)
    assert len(set(statements.TURN_INSERTED)) == len(statements.TURN_INSERTED)
