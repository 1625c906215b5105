"""Writes for conversations and their messages; the only place a turn's seq is assigned."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from garden import events
from garden.models import Agent, Conversation, Message
from garden.storage import turn_bytes


def conversation_create(
    *,
    owner: AbstractBaseUser,
    agent: Agent | None = None,
    group: Any = None,
    title: str = "",
    carried_summary: str = "",
) -> Conversation:
    conversation = Conversation.objects.create(
        owner=owner,
        agent=agent,
        group=group,
        title=title,
        carried_summary=carried_summary,
    )
    return conversation


def agent_conversation_open(*, owner: AbstractBaseUser, agent: Agent) -> Conversation:
    """The owner's latest open 1:1 conversation with ``agent`` — the one its room shows —
    made on first use (under the agent's row, so two first visits make one)."""
    threads = Conversation.objects.filter(
        owner=owner, agent=agent, status=Conversation.Status.OPEN
    ).order_by("-id")
    found = threads.first()
    if found is not None:
        return found
    with transaction.atomic():
        Agent.objects.select_for_update(no_key=True).filter(pk=agent.pk).first()
        return threads.first() or conversation_create(owner=owner, agent=agent, title=agent.name)


def message_payload(message: Message) -> dict[str, Any]:
    """The one JSON shape of a turn, used by the API and by live events alike."""
    agent = message.speaker_agent if message.speaker_agent_id else None
    return {
        "id": message.pk,
        "conversation": message.conversation_id,
        "seq": message.seq,
        "speaker": {
            "kind": message.speaker_kind,
            "agent": agent.pk if agent else None,
            "handle": agent.handle if agent else None,
            "name": agent.name
            if agent
            else ("You" if message.speaker_kind == "owner" else "garden"),
            "colour": agent.colour if agent else None,
        },
        "kind": message.kind,
        "content": message.content,
        "request": message.request_id,
        "addressed_agent": message.addressed_agent_id,
        "created_at": message.created_at.isoformat() if message.created_at else None,
    }


def message_append(
    *,
    conversation_id: int,
    speaker_kind: str,
    content: list[dict[str, Any]],
    speaker_agent: Agent | None = None,
    kind: str = Message.Kind.TURN,
    request_id: int | None = None,
    in_reply_to: Message | None = None,
    addressed_agent: Agent | None = None,
    reply_to_call_id: str = "",
    step: int | None = None,
    channel: str | None = None,
) -> Message:
    """Append one turn with the next seq and push it after commit.

    ``channel`` overrides the event channel (groups push to the group's channel).
    """
    message = Message(
        conversation_id=conversation_id,
        speaker_kind=speaker_kind,
        speaker_agent=speaker_agent,
        kind=kind,
        content=content,
        request_id=request_id,
        in_reply_to=in_reply_to,
        addressed_agent=addressed_agent,
        reply_to_call_id=reply_to_call_id,
        step=step,
    )
    return messages_append(conversation_id=conversation_id, messages=[message], channel=channel)[0]


def messages_append(
    *,
    conversation_id: int,
    messages: list[Message],
    channel: str | None = None,
    also: tuple[str, Sequence[Any]] | None = None,
) -> list[Message]:
    """Append unsaved ``messages`` in order with consecutive seqs and push them after commit:
    one UPDATE takes the seqs, one INSERT writes the turns, however many there are (on
    PostgreSQL both in one statement).

    The UPDATE takes the conversation row's lock until commit, so concurrent appends
    serialise and seqs never collide or leave gaps. ``also`` is one more data-modifying
    statement (SQL and its parameters) of the caller's, written in the same transaction: on
    PostgreSQL in the same statement, elsewhere just before.
    """
    if not messages:
        return []
    # No savepoint: callers batch several writes in one transaction, and a failed append
    # fails the caller's whole transaction anyway.
    with transaction.atomic(savepoint=False):
        if connection.vendor == "postgresql":
            _insert_with_seqs(conversation_id, messages, also=also)
        else:
            if also is not None:
                with connection.cursor() as cursor:
                    cursor.execute(also[0], list(also[1]))
            last = _next_seq(conversation_id, len(messages), stored=_stored(messages))
            for seq, message in enumerate(messages, start=last - len(messages) + 1):
                message.conversation_id, message.seq = conversation_id, seq
            Message.objects.bulk_create(messages)
        channel = channel or events.conversation_channel(conversation_id)
        for message in messages:
            events.send_event_on_commit(
                channel=channel,
                event={
                    "type": "message.created",
                    "seq": message.seq,
                    "message": message_payload(message),
                },
            )
    return messages


def _insert_with_seqs(
    conversation_id: int, messages: list[Message], *, also: tuple[str, Sequence[Any]] | None
) -> None:
    """PostgreSQL: take the seqs and insert the turns in one statement (a data-modifying CTE
    feeding the INSERT): the seq UPDATE's row lock is held to commit, as with two statements.
    Sets each message's conversation, seq and id."""
    fields, row_sql, tail = _insert_shape()
    params: list[Any] = []
    for message in messages:
        message.conversation_id = conversation_id
        params.extend(
            field.get_db_prep_save(field.pre_save(message, add=True), connection)
            for field in fields
        )
    count = len(messages)
    values = ", ".join(row_sql % {"n": n} for n in range(1, count + 1))
    head, head_params = (f"also AS ({also[0]}), ", list(also[1])) if also else ("", [])
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH {head}{tail % {'values': values}}",
            [*head_params, count, _stored(messages), conversation_id, count, *params],
        )
        written = dict((seq, pk) for pk, seq in cursor.fetchall())
    if not written:
        raise Conversation.DoesNotExist(f"conversation {conversation_id}")
    first = min(written)
    for offset, message in enumerate(messages):
        message.seq = first + offset
        message.pk = written[message.seq]
        message._state.adding, message._state.db = False, connection.alias


@functools.cache
def _insert_shape() -> tuple[list, str, str]:
    """The turn insert's fields, one VALUES row (``%(n)s`` its position) and the statement
    after ``WITH`` (``%(values)s`` the rows), built once per process. Each cell is cast to its
    column's type, except that text stays unbounded, so the INSERT (not a cast, which would
    cut it silently) refuses a value too long."""
    fields = [f for f in Message._meta.concrete_fields if f.name not in ("id", "seq")]
    casts = []
    for field in fields:
        db_type = field.db_type(connection)
        casts.append("%%s::" + ("text" if db_type.startswith("varchar") else db_type))
    row_sql = f"({', '.join(casts)}, %(n)s)"
    columns = ", ".join(f'"{f.column}"' for f in fields)
    conversations, table = Conversation._meta.db_table, Message._meta.db_table
    tail = (
        f'taken AS (UPDATE "{conversations}" SET "last_seq" = "last_seq" + %%s, '
        f'"stored_bytes" = "stored_bytes" + %%s '
        f'WHERE "id" = %%s RETURNING "last_seq") '
        f'INSERT INTO "{table}" ({columns}, "seq") '
        f"SELECT {', '.join(f'v.c{i}' for i in range(len(fields)))}, taken.last_seq - %%s + v.n "
        f"FROM taken, (VALUES %(values)s) AS v("
        f"{', '.join(f'c{i}' for i in range(len(fields)))}, n) "
        f'RETURNING "id", "seq"'
    )
    return fields, row_sql, tail


def _stored(messages: list[Message]) -> int:
    """The bytes ``messages`` add to their thread's count (garden/storage.py)."""
    return sum(turn_bytes(m.content) for m in messages)


def _next_seq(conversation_id: int, count: int = 1, *, stored: int = 0) -> int:
    """Take the conversation's next ``count`` seqs in one statement, adding ``stored`` bytes to
    its count; returns the last seq. The row lock it takes serialises concurrent appends
    until commit. (UPDATE … RETURNING: PostgreSQL and SQLite ≥ 3.35.)"""
    table = Conversation._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{table}" SET "last_seq" = "last_seq" + %s, '
            f'"stored_bytes" = "stored_bytes" + %s WHERE "id" = %s RETURNING "last_seq"',
            [count, stored, conversation_id],
        )
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {conversation_id}")
    return row[0]


def messages_move(*, request_id: int, from_conversation_id: int, to_conversation_id: int) -> int:
    """Move a request's turns to another thread, in their order, each taking the next seq
    there; returns how many. Caller holds both threads' group."""
    rows = list(
        Message.objects.filter(request_id=request_id, conversation_id=from_conversation_id)
        .order_by("seq")
        .values_list("pk", "content")
    )
    ids = [pk for pk, _ in rows]
    if ids:
        # Their bytes move with them, so each thread's count stays its turns' (storage).
        moved = sum(turn_bytes(content) for _, content in rows)
        Conversation.objects.filter(pk=from_conversation_id).update(
            stored_bytes=F("stored_bytes") - moved
        )
        last = _next_seq(to_conversation_id, len(ids), stored=moved)
        for seq, pk in enumerate(ids, start=last - len(ids) + 1):
            Message.objects.filter(pk=pk).update(conversation_id=to_conversation_id, seq=seq)
    return len(ids)


def conversation_close(*, conversation: Conversation) -> None:
    conversation.status = Conversation.Status.CLOSED
    conversation.closed_at = timezone.now()
    conversation.save(update_fields=["status", "closed_at"])


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}
