"""Search across what a person can read: the text of the turns of their agents' 1:1
conversations and of their groups' threads (never another owner's, never a deleted group's),
newest first. What is searched is what the room shows as text — a turn's text blocks, not
its tool calls' arguments or results. On PostgreSQL the words of those blocks are matched
through a GIN index (garden/migrations/0019_message_text_search.py), each word of the query as
a prefix; on SQLite, the embedded default, each word is a plain case-insensitive match."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection
from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL

from garden.errors import ServiceError
from garden.models import Message
from groups.models import Group

QUERY_MAX_CHARS = 200
TERMS_MAX = 8
LIMIT_MAX = 50
SNIPPET_CHARS = 160

# The index's expression (garden/migrations/0019_message_text_search.py), written the same way
# so the planner answers the match from the index.
_WORDS = (
    "to_tsvector('simple'::regconfig, jsonb_path_query_array("
    f'"{Message._meta.db_table}"."content", \'$[*] ? (@.type == "text").text\'))'
)
# The punctuation around a word as typed ("(compost," -> "compost"); what is inside it stays
# ("e-mail", "bob@example.com", "2.5").
_EDGES = re.compile(r"^[\W_]+|[\W_]+$")


@dataclass(frozen=True)
class SearchQuery:
    """A query as search reads it: the words it looks for, in the order typed — each what was
    typed between spaces, without the punctuation around it, in lower case."""

    text: str
    terms: tuple[str, ...]


def search_query_check(*, q: str | None) -> SearchQuery:
    """``q`` as words to look for; refuses (SEARCH_QUERY_INVALID on ``q``) a query that is
    missing, longer than QUERY_MAX_CHARS, has no word (a letter or digit), or more than
    TERMS_MAX words."""
    text = (q or "").strip()
    if len(text) > QUERY_MAX_CHARS:
        raise _invalid(f"Search for at most {QUERY_MAX_CHARS} characters.")
    # lower(), as PostgreSQL lowercases the words it indexes (casefold would turn ß to ss).
    # Split at NUL too: no database keeps it in text.
    words = (_EDGES.sub("", piece).lower() for piece in re.split(r"[\s\x00]+", text))
    terms = tuple(dict.fromkeys(word for word in words if word))
    if not terms:
        raise _invalid("Type a word to search for.")
    if len(terms) > TERMS_MAX:
        raise _invalid(f"Search for at most {TERMS_MAX} words.")
    return SearchQuery(text=text, terms=terms)


def _invalid(message: str) -> ServiceError:
    return ServiceError("SEARCH_QUERY_INVALID", message, field="q")


# A word shorter than this is looked for whole, not as the start of longer words: the index
# holds every owner's turns, and "a" as a prefix would read nearly all of them.
PREFIX_MIN_CHARS = 3


def _tsquery(terms: tuple[str, ...]) -> str:
    """Each term quoted, so PostgreSQL's parser splits it as it split the indexed text ("e-mail"
    its parts in a row, an address whole), as a prefix when it has PREFIX_MIN_CHARS or more;
    every one required. Inside quotes a tsquery operator is only text."""
    quoted = (
        (term.replace("\\", "\\\\").replace("'", "''"), len(term) >= PREFIX_MIN_CHARS)
        for term in terms
    )
    return " & ".join(f"'{term}'{':*' if prefix else ''}" for term, prefix in quoted)


def _like(term: str) -> str:
    """``term`` anywhere in the text, its LIKE wildcards taken literally."""
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _matches(terms: tuple[str, ...]) -> RawSQL | Q:
    """The condition that a turn's text blocks hold every term."""
    if connection.vendor == "postgresql":
        return RawSQL(f"{_WORDS} @@ to_tsquery('simple', %s)", [_tsquery(terms)], BooleanField())
    table = Message._meta.db_table
    each = (
        f'EXISTS (SELECT 1 FROM json_each("{table}"."content") AS block '
        "WHERE json_extract(block.value, '$.type') = 'text' "
        "AND json_extract(block.value, '$.text') LIKE %s ESCAPE '\\')"
    )
    found = Q()
    for term in terms:  # LIKE ignores ASCII case
        found &= Q(RawSQL(each, [_like(term)], BooleanField()))
    return found


def turn_search_rows(
    *, owner: AbstractBaseUser, query: SearchQuery, before: int | None = None
) -> QuerySet[Message]:
    """The owner's turns whose text holds every word of ``query``, newest first (and, with
    ``before``, only turns older than that turn id), with each one's conversation, its group
    or agent, and its speaker."""
    readable = Q(
        conversation__group__isnull=True, conversation__agent__removed_at__isnull=True
    ) | Q(
        conversation__group__owner=owner,
        conversation__group__kind=Group.Kind.TEAM,
        conversation__group__deleted_at__isnull=True,
    )
    rows = Message.objects.filter(readable, conversation__owner=owner).filter(_matches(query.terms))
    if before is not None:
        rows = rows.filter(pk__lt=before)
    return rows.select_related(
        "conversation", "conversation__group", "conversation__agent", "speaker_agent"
    ).order_by("-pk")


def turn_search(
    *, owner: AbstractBaseUser, query: SearchQuery, limit: int, before: int | None = None
) -> list[Message]:
    """The first ``limit`` of ``turn_search_rows``. The caller bounds ``limit`` (the API:
    LIMIT_MAX, and one more to tell whether another page follows)."""
    return list(turn_search_rows(owner=owner, query=query, before=before)[:limit])


def snippet(text: str, terms: tuple[str, ...], *, width: int = SNIPPET_CHARS) -> str:
    """A short piece of ``text`` around the first place a term appears (its start when none
    does), on one line, cut at spaces, with an ellipsis where it was cut."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    folded = flat.lower()
    hits = [i for i in (folded.find(t) for t in terms) if i >= 0]
    start = max(0, min(hits, default=0) - width // 3)
    if start:
        space = flat.rfind(" ", 0, start + 1)
        start = space + 1 if space >= 0 and start - space < 20 else start
    end = min(len(flat), start + width)
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > start + width // 2 else end
    return f"{'…' if start else ''}{flat[start:end]}{'…' if end < len(flat) else ''}"
