"""A thread's turns as the projection reads them, kept per process so a step reads from the
database only the turns after the ones it has already seen.

Turns are append-only by ``seq``: a thread's seqs are taken under its row lock, held until
commit, so no reader sees a later seq before an earlier one. Rows of a thread only ever leave
it with the thread (clear, purge) or when a rollover moves queued requests' turns to the next
thread (the old one is closed and never stepped again). The cache holds at most
GARDEN_TRANSCRIPT_CACHE_TURNS turns, least recently used threads first out; a thread larger
than that is read whole, as before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from django.conf import settings

from garden.models import Agent, Message
from garden.providers.types import Block
from garden.transcript import blocks_from_json
from groups.projection import Turn

_COLUMNS = (
    "pk",
    "seq",
    "request_id",
    "speaker_kind",
    "speaker_agent_id",
    "content",
    "kind",
    "addressed_agent_id",
    "reply_to_call_id",
)


@dataclass(frozen=True)
class _Row:
    pk: int
    seq: int
    request_id: int | None
    speaker_kind: str
    speaker_agent_id: int | None
    content: tuple[Block, ...]
    kind: str
    addressed_agent_id: int | None
    reply_to_call_id: str | None


_threads: OrderedDict[int, tuple[int, list[_Row]]] = OrderedDict()
_size = 0
_lock = threading.Lock()


def _read(conversation_id: int, since: int) -> list[_Row]:
    rows = (
        Message.objects.filter(conversation_id=conversation_id, seq__gte=since)
        .exclude(kind=Message.Kind.ACTIVITY)
        .order_by("seq")
        .values_list(*_COLUMNS)
    )
    return [
        _Row(
            pk, seq, request, speaker, agent, blocks_from_json(body), kind, addressed, reply or None
        )
        for pk, seq, request, speaker, agent, body, kind, addressed, reply in rows
    ]


def thread_rows(conversation_id: int) -> list[_Row]:
    """Every turn of the thread but activity lines, in seq order (a snapshot: the caller
    may keep it)."""
    global _size
    with _lock:
        last, rows = _threads.get(conversation_id, (0, []))
    # Read from the last turn already held, to check it is still the same row: a thread
    # whose rows went (deleted with it) starts afresh.
    fresh = _read(conversation_id, last)
    if rows and (not fresh or fresh[0] != rows[-1]):
        rows, fresh = [], _read(conversation_id, 0)
    elif rows:
        fresh = fresh[1:]
    rows = rows + fresh
    limit = settings.GARDEN_TRANSCRIPT_CACHE_TURNS
    with _lock:
        known = _threads.pop(conversation_id, None)
        _size -= len(known[1]) if known else 0
        if len(rows) <= limit:
            _threads[conversation_id] = (rows[-1].seq if rows else last, rows)
            _size += len(rows)
            while _size > limit:
                _, (_, evicted) = _threads.popitem(last=False)
                _size -= len(evicted)
    return rows


def forget() -> None:
    """Drop every thread held (a database rolled back under a test reuses ids)."""
    global _size
    with _lock:
        _threads.clear()
        _size = 0


def transcript(conversation_id: int, *, up_to_request: int, handles: dict[int, str]) -> list[Turn]:
    """The room as the projection sees it: the thread's turns of requests up to
    ``up_to_request`` (and turns of no request), with an owner message queued behind an
    active request placed where its request starts, so each request's turns follow the
    message that asked for them. ``handles`` names the speakers (the room's members); any
    other speaker's handle is read."""
    rows = [
        r
        for r in thread_rows(conversation_id)
        if r.request_id is None or r.request_id <= up_to_request
    ]
    ordered, current = [], 0
    for row in rows:
        current = row.request_id or current
        ordered.append(((current, row.seq), row))
    ordered.sort(key=lambda pair: pair[0])
    missing = {r.speaker_agent_id for r in rows if r.speaker_agent_id} - handles.keys()
    if missing:
        handles = {
            **handles,
            **dict(Agent.objects.filter(pk__in=missing).values_list("pk", "handle")),
        }
    # A rolled-over thread starts with its summary turn (kind "summary"), so the summary
    # the thread carries reaches the models through the transcript itself.
    return [
        Turn(
            seq=position,
            speaker_kind=row.speaker_kind,
            speaker_agent_id=row.speaker_agent_id,
            speaker_handle=handles.get(row.speaker_agent_id) if row.speaker_agent_id else None,
            content=row.content,
            kind=row.kind,
            addressed_agent_id=row.addressed_agent_id,
            reply_to_call_id=row.reply_to_call_id,
        )
        for position, (_, row) in enumerate(ordered, start=1)
    ]
