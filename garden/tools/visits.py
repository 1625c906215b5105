"""The pages agents visit: each http.fetch leaves a visit on the Canvas — the URL, the page's
title, the HTTP status, when and by whom, and a short excerpt of its text.

A visit is text taken out of the page, never the page: tags, scripts and styles are dropped
and the rest is kept as plain text, clipped, so nothing fetched is ever shown as markup. It is
browsing, not a document: kept apart from the owner's documents (file.list and file.read do
not reach it, Documents does not list it, the storage limit does not count it) and bounded by
number instead — an owner keeps the newest ``VISITS_KEPT``, each at most a few kilobytes — so
fetching can neither fill the owner's storage nor be refused for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import QuerySet

from garden.models.memory import PageVisit
from garden.tools import ToolContext

EXCERPT_CHARS = 400
TITLE_CHARS = 200
URL_CHARS = 2000
# An owner's newest visits kept (each at most a few kilobytes); older ones go as new ones come.
VISITS_KEPT = 200
# A room's Canvas lists its newest visits, apart from (and never crowding out) what was made.
ROOM_VISITS = 30
# The media types whose text is worth an excerpt; anything else (a picture, a PDF) is named only.
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml")
# Elements whose text is not the page's: code, styles, and what a browser never shows.
_HIDDEN = frozenset({"script", "style", "noscript", "template", "head", "svg", "iframe"})
# Elements that break a line where they start or end: their texts are words apart.
_BLOCKS = frozenset(
    "address article aside blockquote br dd div dl dt figcaption footer form h1 h2 h3 h4 h5 h6 "
    "header hr li main nav ol p pre section table td th tr ul".split()
)
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Visit:
    """One fetch as the Canvas shows it. ``status`` is None when no answer came (``error``
    names why)."""

    url: str
    status: int | None
    title: str | None
    excerpt: str
    error: str | None = None


class _PageText(HTMLParser):
    """The title and the visible text of an HTML page, as plain text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] = []
        self.text: list[str] = []
        self.hidden = 0
        self.in_title = False
        self.kept = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        elif tag == "body":
            self.hidden = 0  # a head left open ends where the body begins
        elif tag in _HIDDEN:
            self.hidden += 1
        elif tag in _BLOCKS:
            self.text.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        elif tag in _HIDDEN and self.hidden:
            self.hidden -= 1
        elif tag in _BLOCKS:
            self.text.append(" ")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
        elif not self.hidden and self.kept < EXCERPT_CHARS * 2:
            self.text.append(data)
            self.kept += len(data.strip())


def _squeeze(text: str, limit: int) -> str:
    text = _SPACE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def page_visit(*, url: str, status: int, content_type: str, body: str) -> Visit:
    """What a fetched page leaves on the Canvas: its title (an HTML page's <title>, else none)
    and an excerpt of its text, tags stripped, clipped to ``EXCERPT_CHARS``."""
    kind = content_type.split(";")[0].strip().lower()
    html = "html" in kind or (
        not kind and body.lstrip()[:15].lower().startswith(("<!doctype", "<html"))
    )
    title, excerpt = None, ""
    if html:
        page = _PageText()
        page.feed(body)
        page.close()
        title = _squeeze("".join(page.title), TITLE_CHARS) or None
        excerpt = _squeeze("".join(page.text), EXCERPT_CHARS)
    elif not kind or kind.startswith(_TEXT_TYPES) or kind.endswith(("+json", "+xml")):
        excerpt = _squeeze(body[: EXCERPT_CHARS * 4], EXCERPT_CHARS)
    return Visit(url=url[:URL_CHARS], status=status, title=title, excerpt=excerpt)


def failed_visit(*, url: str, code: str, message: str) -> Visit:
    """A fetch that got no answer (an unreachable host, a timeout): the error is its excerpt."""
    return Visit(
        url=url[:URL_CHARS],
        status=None,
        title=None,
        excerpt=_squeeze(message, EXCERPT_CHARS),
        error=code,
    )


def visit_record(*, ctx: ToolContext, visit: Visit) -> PageVisit:
    """Keep ``visit`` in the thread of ``ctx``, tagged with its agent, and let the owner's
    visits beyond the newest ``VISITS_KEPT`` go. Opens its own transaction: call it after the
    fetch, never around one."""
    with transaction.atomic():
        kept = PageVisit.objects.create(
            owner_id=ctx.owner_id,
            agent_id=ctx.agent_id,
            conversation_id=ctx.conversation_id,
            url=visit.url,
            status=visit.status,
            error=visit.error or "",
            title=visit.title or "",
            excerpt=visit.excerpt,
        )
        older = PageVisit.objects.filter(owner_id=ctx.owner_id).order_by("-id")
        PageVisit.objects.filter(
            pk__in=list(older.values_list("pk", flat=True)[VISITS_KEPT:])
        ).delete()
    return kept


def room_visits(
    *, owner: AbstractBaseUser, group_id: int | None = None, conversation_id: int | None = None
) -> QuerySet[PageVisit]:
    """The pages the agents of a group (or of the 1:1 conversation ``conversation_id``)
    visited, newest first, for its Canvas."""
    where = (
        {"conversation_id": conversation_id}
        if conversation_id is not None
        else {"conversation__group_id": group_id}
    )
    return (
        PageVisit.objects.filter(owner=owner, **where)
        .select_related("agent")
        .order_by("-id")[:ROOM_VISITS]
    )
