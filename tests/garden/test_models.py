"""Core rows: built-in agents per owner, handles, trusted speakers, monotonic seq."""

import pytest
from django.db import IntegrityError, transaction

from garden.models import Agent, Conversation, Message
from garden.services.agents import agent_builtins_ensure
from garden.services.conversations import conversation_create, message_append, text_block

pytestmark = pytest.mark.django_db


def test_every_new_user_gets_agent_father_and_concierge(owner):
    builtins = dict(Agent.objects.filter(owner=owner).values_list("builtin", "handle"))
    assert builtins == {"maker": "father", "concierge": "concierge"}
    assert all(a.can_run for a in Agent.objects.filter(owner=owner))


def test_builtins_are_not_duplicated(owner):
    agent_builtins_ensure(owner=owner)
    agent_builtins_ensure(owner=owner)
    assert Agent.objects.filter(owner=owner).count() == 2


def test_handle_is_unique_per_owner_but_not_across_owners(owner, stranger):
    assert Agent.objects.filter(handle="concierge").count() == 2
    with pytest.raises(IntegrityError), transaction.atomic():
        Agent.objects.create(owner=owner, handle="concierge", name="Another")


def test_agent_speaker_must_name_its_agent(owner):
    conv = conversation_create(
        owner=owner, agent=Agent.objects.get(owner=owner, handle="concierge")
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(conversation=conv, seq=1, speaker_kind="agent", content=[])


def test_owner_speaker_cannot_claim_an_agent(owner):
    agent = Agent.objects.get(owner=owner, handle="concierge")
    conv = conversation_create(owner=owner, agent=agent)
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(
            conversation=conv, seq=1, speaker_kind="owner", speaker_agent=agent, content=[]
        )


def test_conversation_belongs_to_an_agent_or_a_group(owner):
    with pytest.raises(IntegrityError), transaction.atomic():
        Conversation.objects.create(owner=owner)


def test_seq_is_monotonic_per_conversation(owner):
    agent = Agent.objects.get(owner=owner, handle="concierge")
    a = conversation_create(owner=owner, agent=agent)
    b = conversation_create(owner=owner, agent=agent)
    seqs = [
        message_append(conversation_id=c.pk, speaker_kind="owner", content=[text_block("x")]).seq
        for c in (a, a, b, a)
    ]
    assert seqs == [1, 2, 1, 3]


def test_several_turns_append_in_order_with_one_seq_update_and_one_insert(owner):
    """However many turns: the seqs are taken once and the turns written once."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from garden.services.conversations import messages_append

    agent = Agent.objects.get(owner=owner, handle="concierge")
    conv = conversation_create(owner=owner, agent=agent)
    message_append(conversation_id=conv.pk, speaker_kind="owner", content=[text_block("first")])
    batch = [
        Message(speaker_kind="agent", speaker_agent=agent, content=[text_block(t)]) for t in "abc"
    ]
    with CaptureQueriesContext(connection) as queries:
        written = messages_append(conversation_id=conv.pk, messages=batch)
    writes = [
        q["sql"].split()[0]
        for q in queries.captured_queries
        if q["sql"].split()[0] in ("UPDATE", "INSERT", "WITH")
    ]
    # On PostgreSQL the seq update feeds the insert in one statement.
    assert writes == (["WITH"] if connection.vendor == "postgresql" else ["UPDATE", "INSERT"])
    assert [m.seq for m in written] == [2, 3, 4] and all(m.pk for m in written)
    stored = list(
        Message.objects.filter(conversation=conv).order_by("seq").values_list("seq", "content")
    )
    assert [(s, c[0]["text"]) for s, c in stored] == [(1, "first"), (2, "a"), (3, "b"), (4, "c")]
    assert messages_append(conversation_id=conv.pk, messages=[]) == []
    assert message_append(conversation_id=conv.pk, speaker_kind="owner", content=[]).seq == 5


@pytest.mark.postgres
def test_a_turn_field_too_long_is_refused_not_cut(owner):
    """Whatever path writes a turn, a value longer than its column fails loudly and writes
    nothing; it is never stored cut short."""
    from django.db import DataError, transaction

    from garden.services.conversations import messages_append

    agent = Agent.objects.get(owner=owner, handle="concierge")
    conv = conversation_create(owner=owner, agent=agent)
    too_long = "c" * 150
    with pytest.raises(DataError), transaction.atomic():
        messages_append(
            conversation_id=conv.pk,
            messages=[
                Message(speaker_kind="agent", speaker_agent=agent, reply_to_call_id=too_long)
            ],
        )
    assert not Message.objects.filter(conversation=conv).exists()
