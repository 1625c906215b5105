"""What one owner keeps in the shared database, measured and held to
GARDEN_MAX_STORAGE_BYTES_PER_OWNER: artifacts (documents agents write, kept tool outputs,
attached files), memory notes and stored turns.

Measured cheaply, and without a counter that could drift: each part is a sum over rows found
by the owner's index, and a row's bytes go when the row goes (a cascade included). Artifacts
carry their ``size``; notes are summed by their text's octet length (short, a few thousand at
most); turns, the many rows, are summed per thread instead of per turn: every append adds its
turns' bytes to ``Conversation.stored_bytes`` in the statement that takes their seqs, so an
owner's turns cost one row per thread to add up, and a deleted thread takes its bytes along.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Exists, Func, IntegerField, OuterRef, QuerySet, Sum

from garden.errors import QuotaExceeded
from garden.models import Artifact, AttachmentData, Conversation, MemoryNote
from garden.quotas import quota_hold


class OctetLength(Func):
    """A text's length in bytes (UTF-8), on PostgreSQL and on SQLite."""

    function = "OCTET_LENGTH"
    output_field = IntegerField()

    def as_sqlite(self, compiler, connection, **extra):  # type: ignore[no-untyped-def]
        return super().as_sql(
            compiler, connection, template="LENGTH(CAST(%(expressions)s AS BLOB))", **extra
        )


def turn_bytes(content: list[dict[str, Any]]) -> int:
    """The bytes a turn's content stores: its JSON text, UTF-8."""
    return len(json.dumps(content, ensure_ascii=False).encode())


@dataclass(frozen=True)
class StorageUsage:
    artifacts: int
    notes: int
    turns: int
    limit: int

    @property
    def total(self) -> int:
        return self.artifacts + self.notes + self.turns

    def to_json(self) -> dict[str, int]:
        return {
            "artifacts": self.artifacts,
            "notes": self.notes,
            "turns": self.turns,
            "total": self.total,
            "limit": self.limit,
        }


def storage_usage(*, owner_id: int) -> StorageUsage:
    """The owner's stored bytes now, by part, with the site's limit."""
    artifacts = Artifact.objects.filter(owner_id=owner_id).aggregate(n=Sum("size"))["n"]
    notes = MemoryNote.objects.filter(owner_id=owner_id).aggregate(n=Sum(OctetLength("text")))
    turns = Conversation.objects.filter(owner_id=owner_id).aggregate(n=Sum("stored_bytes"))
    return StorageUsage(
        artifacts=artifacts or 0,
        notes=notes["n"] or 0,
        turns=turns["n"] or 0,
        limit=settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER,
    )


def storage_full(*, limit: int, field: str | None = None) -> QuotaExceeded:
    return QuotaExceeded(
        "STORAGE_FULL",
        f"Your stored documents, notes and turns would pass {limit:,} bytes, the limit on this "
        "site; delete documents you no longer need (Documents) or clear a group's history.",
        field=field,
    )


def storage_hold(*, owner_id: int, field: str | None = None) -> None:
    """After writing, in the same transaction: refuse (409 STORAGE_FULL, rolling the write
    back) when the owner's stored bytes, the write included, pass the limit. Takes the
    owner's quota lock, so call it after every row lock (garden/quotas.py)."""
    limit = settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER
    quota_hold(
        owner_id=owner_id,
        count=lambda: storage_usage(owner_id=owner_id).total,
        limit=limit,
        refusal=lambda: storage_full(limit=limit, field=field),
    )


def storage_check(*, owner_id: int, adding: int) -> None:
    """Before a write that cannot take the owner's lock (a step's, whose turns take their
    thread's row after it): refuse when the owner's stored bytes plus ``adding`` would pass
    the limit. Unserialised, so steps of one owner running at once may each pass it once: the
    overshoot is at most one such write per running step."""
    limit = settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER
    if storage_usage(owner_id=owner_id).total + adding > limit:
        raise storage_full(limit=limit)


def owner_artifacts(*, owner_id: int) -> QuerySet[Artifact]:
    """Every artifact the owner keeps, newest first, without their texts: what agents wrote,
    outputs kept, files attached — with a thread or without one (its history cleared or its
    group purged), none hidden."""
    return (
        Artifact.objects.filter(owner_id=owner_id)
        .select_related("agent", "conversation__group", "conversation__agent")
        .defer("content")
        .annotate(attached=Exists(AttachmentData.objects.filter(artifact=OuterRef("pk"))))
        .order_by("-id")
    )
