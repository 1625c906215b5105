"""What an export holds, as plain dataclasses (no ORM), and the one size cap every export is
written under: the export is built in memory, so its bytes are bounded before anything is sent."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from garden.errors import ServiceError

# The version of the document's shape (schema/conversation-export.schema.json).
EXPORT_VERSION = 1
FORMATS = ("json", "markdown")


@dataclass(frozen=True)
class Speaker:
    """Who said a turn or asked for an approval: the owner, garden, or an agent."""

    kind: str
    name: str
    agent_id: int | None = None
    handle: str | None = None


@dataclass(frozen=True)
class ToolCallRecord:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolResultRecord:
    call_id: str
    content: str
    is_error: bool


@dataclass(frozen=True)
class ArtifactRefRecord:
    """A turn's reference to an artifact: never its contents."""

    artifact_id: str
    kind: str
    title: str


@dataclass(frozen=True)
class TurnRecord:
    id: int
    seq: int
    at: datetime | None
    kind: str
    speaker: Speaker
    text: str
    tool_calls: tuple[ToolCallRecord, ...] = ()
    tool_results: tuple[ToolResultRecord, ...] = ()
    artifacts: tuple[ArtifactRefRecord, ...] = ()
    request_id: int | None = None
    addressed_agent_id: int | None = None


@dataclass(frozen=True)
class RequestRecord:
    id: int
    state: str
    source: str
    outcome_code: str
    outcome: str
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class ApprovalRecord:
    id: int
    tool_call_id: str
    request_id: int | None
    agent: Speaker
    action_name: str
    arguments: dict[str, Any]
    approved_arguments: dict[str, Any] | None
    status: str
    decided_by: str | None
    surface: str
    reason: str
    created_at: datetime | None
    decided_at: datetime | None
    executed_at: datetime | None


@dataclass(frozen=True)
class ArtifactRecord:
    """An artifact of the history, by reference: id, kind, title and type, not its contents."""

    id: int
    kind: str
    title: str
    mime_type: str
    size: int
    conversation_id: int | None
    agent_id: int | None
    created_at: datetime | None


@dataclass(frozen=True)
class ConversationRecord:
    """One thread. Its turns are read a page at a time as the document is written."""

    id: int
    title: str
    status: str
    created_at: datetime | None
    closed_at: datetime | None
    carried_summary: str
    requests: tuple[RequestRecord, ...]
    approvals: tuple[ApprovalRecord, ...]
    turns: Iterable[TurnRecord] = ()


@dataclass(frozen=True)
class ExportRecord:
    """The history of one room: a group's every thread, or one 1:1 conversation."""

    scope: str  # "group" or "conversation"
    title: str
    exported_at: datetime
    owner: str
    group_id: int | None
    agent: Speaker | None
    members: tuple[Speaker, ...]
    conversations: Iterable[ConversationRecord]
    # Read after the conversations, when every turn's references are known.
    artifacts: Callable[[], Iterable[ArtifactRecord]] = field(default=lambda: ())


def export_too_large(max_bytes: int) -> ServiceError:
    return ServiceError(
        "EXPORT_TOO_LARGE",
        f"This history is larger than an export may be ({max_bytes:,} bytes, "
        "GARDEN_EXPORT_MAX_BYTES).",
        status=413,
    )


def collect(chunks: Iterator[str], *, max_bytes: int) -> bytes:
    """The document ``chunks`` make, as UTF-8; EXPORT_TOO_LARGE (413) as soon as it passes
    ``max_bytes``, so an oversized history is never held whole."""
    parts: list[bytes] = []
    total = 0
    for chunk in chunks:
        data = chunk.encode("utf-8")
        total += len(data)
        if total > max_bytes:
            raise export_too_large(max_bytes)
        parts.append(data)
    return b"".join(parts)
