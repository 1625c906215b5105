"""garden's critical writes, each written twice side by side: its ORM reference (the meaning,
run on every database that is not PostgreSQL) and a hand-built PostgreSQL statement that
writes the same rows and refuses the same cases in one round trip. ``_fast`` is the one place
that chooses; tests/garden/test_statements.py runs both paths against the same rows.

A caller above garden never hands SQL in: it describes the one row it wants updated with the
turns (``RowUpdate``), and this module writes that update itself."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import F, Model

from garden.models import Conversation, Message

# The turn fields the fast path's INSERT names (its seq comes from the conversation row, its
# id from the database). A field added to Message belongs here (tests/garden/test_statements.py
# checks), or the fast path would leave it out where the ORM writes it.
TURN_INSERTED = (
    "conversation",
    "speaker_kind",
    "speaker_agent",
    "kind",
    "content",
    "in_reply_to",
    "request",
    "addressed_agent",
    "reply_to_call_id",
    "step",
    "created_at",
    "stopped_at",
    "author",
)


def _fast() -> bool:
    """The one dispatch point: the hand-built statements run on PostgreSQL only."""
    return connection.vendor == "postgresql"


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


@dataclass(frozen=True)
class RowUpdate:
    """One row's update, described rather than written: ``values`` (field name -> value, as
    the model holds it) set on the ``model`` row ``pk``. Written with turns, it goes in their
    statement."""

    model: type[Model]
    pk: Any
    values: Mapping[str, Any]

    @classmethod
    def of(cls, instance: Model, fields: Sequence[str]) -> RowUpdate:
        """What ``instance.save(update_fields=fields)`` would write (its fields' pre-save hooks,
        such as ``auto_now``, applied to ``instance`` as save applies them)."""
        meta = instance._meta
        values = {name: meta.get_field(name).pre_save(instance, False) for name in fields}
        return cls(model=type(instance), pk=instance.pk, values=values)


def row_update(update: RowUpdate) -> int:
    """Write ``update`` on its own (one UPDATE on every database, no fast path needed);
    returns how many rows it matched (0: the row is gone)."""
    meta = update.model._meta
    values = {meta.get_field(name).attname: value for name, value in update.values.items()}
    return update.model._base_manager.filter(pk=update.pk).update(**values)


def _row_update_sql(update: RowUpdate) -> tuple[str, list[Any]]:
    """The UPDATE that ``row_update`` runs, as SQL and parameters, for a fast path to embed."""
    meta = update.model._meta
    fields = [meta.get_field(name) for name in update.values]
    sql = (
        f"UPDATE {_q(meta.db_table)} SET {', '.join(f'{_q(f.column)} = %s' for f in fields)} "
        f"WHERE {_q(meta.pk.column)} = %s"
    )
    params = [f.get_db_prep_save(update.values[f.name], connection) for f in fields]
    return sql, [*params, meta.pk.get_db_prep_value(update.pk, connection)]


# -- seqs ------------------------------------------------------------------------------------


def take_seqs(*, conversation_id: int, count: int, stored: int = 0) -> int:
    """Take the conversation's next ``count`` seqs, adding ``stored`` bytes to its count;
    returns the last seq taken. The row lock it takes serialises concurrent appends until
    commit, so seqs never collide or leave gaps. Refuses (Conversation.DoesNotExist, nothing
    written) a conversation that is gone."""
    if _fast():
        return take_seqs_pg(conversation_id=conversation_id, count=count, stored=stored)
    return take_seqs_orm(conversation_id=conversation_id, count=count, stored=stored)


def take_seqs_orm(*, conversation_id: int, count: int, stored: int = 0) -> int:
    """The reference: the counting UPDATE, its rowcount deciding, then the row read back
    (under the lock the UPDATE took)."""
    rows = Conversation.objects.filter(pk=conversation_id)
    if not rows.update(last_seq=F("last_seq") + count, stored_bytes=F("stored_bytes") + stored):
        raise Conversation.DoesNotExist(f"conversation {conversation_id}")
    return rows.values_list("last_seq", flat=True).get()


def take_seqs_pg(*, conversation_id: int, count: int, stored: int = 0) -> int:
    """PostgreSQL: the same UPDATE returning the last seq, in one round trip."""
    with connection.cursor() as cursor:
        cursor.execute(_TAKE_SEQS, [count, stored, conversation_id])
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {conversation_id}")
    return row[0]


_TAKE_SEQS = (
    f'UPDATE "{Conversation._meta.db_table}" SET "last_seq" = "last_seq" + %s, '
    f'"stored_bytes" = "stored_bytes" + %s WHERE "id" = %s RETURNING "last_seq"'
)


# -- turns -----------------------------------------------------------------------------------


def insert_turns(
    *,
    conversation_id: int,
    messages: list[Message],
    stored: int,
    also: RowUpdate | None = None,
) -> None:
    """Write unsaved ``messages`` in order under the conversation's next consecutive seqs
    (adding ``stored`` bytes to its count), and ``also`` with them; sets each message's
    conversation, seq and id. The caller holds a transaction. Refuses (Conversation.DoesNotExist;
    IntegrityError for a seq already taken, or a field against a constraint) with nothing
    written by the caller's transaction once it rolls back."""
    kwargs = {"conversation_id": conversation_id, "messages": messages, "stored": stored}
    if _fast():
        insert_turns_pg(**kwargs, also=also)
    else:
        insert_turns_orm(**kwargs, also=also)


def insert_turns_orm(
    *,
    conversation_id: int,
    messages: list[Message],
    stored: int,
    also: RowUpdate | None = None,
) -> None:
    """The reference: ``also``, the seqs taken, one bulk INSERT."""
    if also is not None:
        row_update(also)
    last = take_seqs_orm(conversation_id=conversation_id, count=len(messages), stored=stored)
    for seq, message in enumerate(messages, start=last - len(messages) + 1):
        message.conversation_id, message.seq = conversation_id, seq
    Message.objects.bulk_create(messages)


def insert_turns_pg(
    *,
    conversation_id: int,
    messages: list[Message],
    stored: int,
    also: RowUpdate | None = None,
) -> None:
    """PostgreSQL: ``also``, the seqs and the turns in one statement (data-modifying CTEs
    feeding the INSERT): the seq UPDATE's row lock is held to commit, as with two statements.
    Each cell is cast to its column's type, except that text stays unbounded, so the INSERT
    (not a cast, which would cut it silently) refuses a value too long."""
    head, head_params = "", []
    if also is not None:
        also_sql, head_params = _row_update_sql(also)
        head = f"also AS ({also_sql}), "
    turns = turns_insert_ctes(conversation_id=conversation_id, messages=messages, stored=stored)
    with connection.cursor() as cursor:
        cursor.execute(
            f'WITH {head}{turns.sql} SELECT "id", "seq" FROM turns',
            [*head_params, *turns.params],
        )
        written = cursor.fetchall()
    if not written:
        raise Conversation.DoesNotExist(f"conversation {conversation_id}")
    turns_written(messages, written)


@dataclass(frozen=True)
class TurnsInsert:
    """The PostgreSQL that takes turns' seqs and inserts them, as two CTEs — ``taken`` (the
    conversation's UPDATE) and ``turns`` (the INSERT, returning each turn's id and seq) — for
    a statement built around them, with their parameters in order."""

    sql: str
    params: list[Any]


def turns_insert_ctes(
    *, conversation_id: int, messages: list[Message], stored: int, only_after: str = ""
) -> TurnsInsert:
    """The CTEs that write unsaved ``messages`` under the conversation's next consecutive
    seqs, adding ``stored`` bytes to its count: the one shape of the turn insert, which
    ``insert_turns_pg`` and a statement of a caller's (groups/statements.py) run. With
    ``only_after``, the name of a CTE of that statement, nothing is written unless it returns a
    row. Each cell is cast to its column's type, except that text stays unbounded, so the
    INSERT (not a cast, which would cut it silently) refuses a value too long."""
    fields = [Message._meta.get_field(name) for name in TURN_INSERTED]
    params: list[Any] = []
    for message in messages:
        message.conversation_id = conversation_id
        params.extend(
            field.get_db_prep_save(field.pre_save(message, add=True), connection)
            for field in fields
        )
    count = len(messages)
    row_sql, tail = _turns_shape()
    values = ", ".join(row_sql % {"n": n} for n in range(1, count + 1))
    guard = f" AND EXISTS (SELECT 1 FROM {_q(only_after)})" if only_after else ""
    return TurnsInsert(
        sql=tail % {"values": values, "guard": guard},
        params=[count, stored, conversation_id, count, *params],
    )


def turns_written(messages: list[Message], written: Sequence[tuple[int, int]]) -> None:
    """Give ``messages`` the ids and seqs the turn insert returned (``(id, seq)`` rows)."""
    by_seq = {seq: pk for pk, seq in written}
    first = min(by_seq)
    for offset, message in enumerate(messages):
        message.seq = first + offset
        message.pk = by_seq[message.seq]
        message._state.adding, message._state.db = False, connection.alias


@functools.cache
def _turns_shape() -> tuple[str, str]:
    """One VALUES row of the turn insert (``%(n)s`` its position) and its two CTEs
    (``%(values)s`` the rows, ``%(guard)s`` a condition on the conversation's UPDATE), built
    once per process from ``TURN_INSERTED``."""
    fields = [Message._meta.get_field(name) for name in TURN_INSERTED]
    casts = []
    for field in fields:
        db_type = field.db_type(connection)
        casts.append("%%s::" + ("text" if db_type.startswith("varchar") else db_type))
    cells = ", ".join(f"c{i}" for i in range(len(fields)))
    tail = (
        f'taken AS (UPDATE "{Conversation._meta.db_table}" SET "last_seq" = "last_seq" + %%s, '
        f'"stored_bytes" = "stored_bytes" + %%s WHERE "id" = %%s%(guard)s RETURNING "last_seq"), '
        f'turns AS (INSERT INTO "{Message._meta.db_table}" '
        f'({", ".join(_q(f.column) for f in fields)}, "seq") '
        f"SELECT {', '.join(f'v.{c}' for c in cells.split(', '))}, "
        f"taken.last_seq - %%s + v.n FROM taken, (VALUES %(values)s) AS v({cells}, n) "
        f'RETURNING "id", "seq")'
    )
    return f"({', '.join(casts)}, %(n)s)", tail
