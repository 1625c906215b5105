"""A thread's turns as the projection reads them, kept per process so a step reads from the
database only the turns after the ones it has already seen.

Turns are append-only by ``seq``: a thread's seqs are taken under its row lock, held until
commit, so no reader sees a later seq before an earlier one. Rows of a thread only ever leave
it with the thread (clear, purge) or when a rollover moves queued requests' turns to the next
thread (the old one is closed and never stepped again). The cache holds at most
GARDEN_TRANSCRIPT_CACHE_TURNS turns, least recently used threads first out; a thread larger
than that is read whole, as before. It holds at most about GARDEN_TRANSCRIPT_CACHE_BYTES of
their text too, counted as each row is read, so a few threads of long turns cannot fill a
worker's memory.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model

from garden.models import Agent, Message
from garden.providers.types import Block
from garden.transcript import blocks_from_json
from groups.domain.projection import Turn

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
    "author_id",
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
    author_id: int | None
    # About how many bytes the row holds (its text and arguments, plus the row itself).
    size: int = field(default=0, compare=False)


@dataclass(frozen=True)
class _Held:
    """A thread as this process holds it: its turns but activity lines, in seq order, the
    seq up to which every turn (activity lines included) has been seen, and the rows' size."""

    rows: list[_Row]
    through: int
    size: int = 0


_threads: OrderedDict[int, _Held] = OrderedDict()
_size = 0  # turns held, all threads
_bytes = 0  # their size, all threads
_lock = threading.Lock()

# What a row costs beside its text: the objects that hold it.
_ROW_OVERHEAD = 400


def _row(pk, seq, request, speaker, agent, body, kind, addressed, reply, author) -> _Row:
    return _Row(
        pk,
        seq,
        request,
        speaker,
        agent,
        blocks_from_json(body),
        kind,
        addressed,
        reply or None,
        author,
        _weight(body),
    )


def person_names(ids: set[int]) -> dict[int, str]:
    """The usernames of the people ``ids`` (unique, with no spaces: no person's name in the
    room can be made to read as another's); a deleted person's turns keep no name."""
    users = get_user_model()
    return dict(users.objects.filter(pk__in=ids).values_list("pk", users.USERNAME_FIELD))


def _weight(body: list[dict[str, Any]]) -> int:
    """About how many bytes a row's content holds: its strings, and tool-call arguments as
    their JSON."""
    size = _ROW_OVERHEAD
    for block in body:
        for value in block.values():
            if isinstance(value, str):
                size += len(value)
            elif isinstance(value, (dict, list)):
                size += len(json.dumps(value))
    return size


def _read(conversation_id: int, since: int) -> list[_Row]:
    rows = (
        Message.objects.filter(conversation_id=conversation_id, seq__gte=since)
        .exclude(kind=Message.Kind.ACTIVITY)
        .order_by("seq")
        .values_list(*_COLUMNS)
    )
    return [_row(*values) for values in rows]


def thread_rows(
    conversation_id: int, *, last_seq: int | None = None, floor_seq: int = 0
) -> list[_Row]:
    """Every turn of the thread but activity lines, in seq order (a snapshot: the caller
    may keep it). ``last_seq``, the thread's last seq as just read from its row (every turn
    up to it is committed), spares the read when this process has seen that far.
    ``floor_seq`` leaves out what a thread that never rolls over holds from before it (an
    agent's 1:1 conversation): a thread read afresh is read from there."""
    with _lock:
        held = _threads.get(conversation_id)
        if held is not None:
            _threads.move_to_end(conversation_id)
    if held is not None and last_seq is not None and held.through >= last_seq:
        return held.rows
    rows = held.rows if held else []
    last = rows[-1].seq if rows else floor_seq
    # Read from the last turn already held, to check it is still the same row: a thread
    # whose rows went (deleted with it) starts afresh.
    fresh = _read(conversation_id, last)
    size = held.size if held else 0
    if rows and (not fresh or fresh[0] != rows[-1]):
        rows, fresh, size = [], _read(conversation_id, floor_seq), 0
    elif rows:
        fresh = fresh[1:]
    rows = rows + fresh
    through = max(last_seq or 0, rows[-1].seq if rows else 0)
    _hold(conversation_id, _Held(rows, through, size + sum(r.size for r in fresh)))
    return rows


def remember(conversation_id: int, messages: Sequence[Message]) -> None:
    """Turns this process has just committed to the thread, with consecutive seqs: held
    at once when they follow the last seq held, so the next step need not read them."""
    if not messages:
        return
    first = messages[0].seq
    with _lock:
        held = _threads.get(conversation_id)
    if held is None or held.through != first - 1:
        return
    fresh = [
        _row(
            m.pk,
            m.seq,
            m.request_id,
            m.speaker_kind,
            m.speaker_agent_id,
            m.content,
            m.kind,
            m.addressed_agent_id,
            m.reply_to_call_id,
            m.author_id,
        )
        for m in messages
        if m.kind != Message.Kind.ACTIVITY
    ]
    _hold(
        conversation_id,
        _Held(held.rows + fresh, messages[-1].seq, held.size + sum(r.size for r in fresh)),
        expect=held,
    )


def _hold(conversation_id: int, held: _Held, *, expect: _Held | None = None) -> None:
    """Keep ``held`` for the thread (with ``expect``, only if that is still what is held),
    within GARDEN_TRANSCRIPT_CACHE_TURNS and GARDEN_TRANSCRIPT_CACHE_BYTES, least recently
    used threads out first; a thread larger than either is not kept."""
    global _size, _bytes
    limit = settings.GARDEN_TRANSCRIPT_CACHE_TURNS
    byte_limit = settings.GARDEN_TRANSCRIPT_CACHE_BYTES
    with _lock:
        known = _threads.get(conversation_id)
        if expect is not None and known is not expect:
            return
        if known is not None:
            del _threads[conversation_id]
            _size -= len(known.rows)
            _bytes -= known.size
        if len(held.rows) <= limit and held.size <= byte_limit:
            _threads[conversation_id] = held
            _size += len(held.rows)
            _bytes += held.size
            while _size > limit or _bytes > byte_limit:
                gone, evicted = _threads.popitem(last=False)
                _views.pop(gone, None)
                _size -= len(evicted.rows)
                _bytes -= evicted.size
        else:
            _views.pop(conversation_id, None)


def forget() -> None:
    """Drop every thread held (a database rolled back under a test reuses ids)."""
    global _size, _bytes
    with _lock:
        _threads.clear()
        _views.clear()
        _size = _bytes = 0


@dataclass(frozen=True)
class _View:
    """A thread's turns as one request's steps see them, kept so the next step only adds
    the turns after ``last_row``."""

    up_to: int
    handles: dict[int, str]  # the room's members, as given
    named: dict[int, str]  # those and any other speaker read since
    people: dict[int, str]  # the names of the people who said its person turns
    rows_seen: int
    last_row: _Row | None
    current: int  # the request the last row belongs to
    last_key: tuple[int, int]
    turns: list[Turn]


_views: dict[int, _View] = {}


def transcript(
    conversation_id: int,
    *,
    up_to_request: int,
    handles: dict[int, str],
    last_seq: int | None = None,
    floor_seq: int = 0,
) -> list[Turn]:
    """The room as the projection sees it: the thread's turns of requests up to
    ``up_to_request`` (and turns of no request), with an owner message queued behind an
    active request placed where its request starts, so each request's turns follow the
    message that asked for them. ``handles`` names the speakers (the room's members); any
    other speaker's handle is read.

    The turns built for the thread's last request are kept with it: a step of the same
    request, with the same members, builds only the turns that came since."""
    rows = thread_rows(conversation_id, last_seq=last_seq, floor_seq=floor_seq)
    with _lock:
        view = _views.get(conversation_id)
    if (
        view is None
        or view.up_to != up_to_request
        or view.handles != handles
        or view.rows_seen > len(rows)
        or (view.rows_seen and rows[view.rows_seen - 1] is not view.last_row)
    ):
        view = None
    extended = _extend(view, rows, up_to_request, handles) if view else None
    if extended is None:
        extended = _extend(
            _View(up_to_request, dict(handles), dict(handles), {}, 0, None, 0, (0, 0), []),
            rows,
            up_to_request,
            handles,
        )
    with _lock:
        if conversation_id in _threads:
            _views[conversation_id] = extended
    return list(extended.turns)


def _extend(view: _View, rows: list[_Row], up_to: int, handles: dict[int, str]) -> _View | None:
    """``view`` with the turns of ``rows`` after the ones it has seen; None when one of them
    would sort before a turn it holds (the caller builds afresh)."""
    fresh = [r for r in rows[view.rows_seen :] if r.request_id is None or r.request_id <= up_to]
    keyed, current = [], view.current
    for row in fresh:
        current = row.request_id or current
        keyed.append(((current, row.seq), row))
    if view.turns and keyed and min(key for key, _ in keyed) < view.last_key:
        return None
    keyed.sort(key=lambda pair: pair[0])
    named = view.named
    missing = {r.speaker_agent_id for r in fresh if r.speaker_agent_id} - named.keys()
    if missing:
        named = {
            **named,
            **dict(Agent.objects.filter(pk__in=missing).values_list("pk", "handle")),
        }
    people = view.people
    unnamed = {r.author_id for r in fresh if r.author_id} - people.keys()
    if unnamed:
        people = {**people, **person_names(unnamed)}
    # A rolled-over thread starts with its summary turn (kind "summary"), so the summary
    # the thread carries reaches the models through the transcript itself.
    turns = view.turns + [
        Turn(
            seq=position,
            speaker_kind=row.speaker_kind,
            speaker_agent_id=row.speaker_agent_id,
            speaker_handle=named.get(row.speaker_agent_id) if row.speaker_agent_id else None,
            speaker_person=people.get(row.author_id) if row.author_id else None,
            content=row.content,
            kind=row.kind,
            addressed_agent_id=row.addressed_agent_id,
            reply_to_call_id=row.reply_to_call_id,
        )
        for position, (_, row) in enumerate(keyed, start=len(view.turns) + 1)
    ]
    return _View(
        up_to=up_to,
        handles=view.handles,
        named=named,
        people=people,
        rows_seen=len(rows),
        last_row=rows[-1] if rows else None,
        current=current,
        last_key=keyed[-1][0] if keyed else view.last_key,
        turns=turns,
    )
