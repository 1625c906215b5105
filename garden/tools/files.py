"""The artifact tools: file.write puts a document into the library as an Artifact (a side
effect); file.list and file.read reach what the team made and kept — another member's
document, an output too large to carry — by reference, paged to fit the room.

Reads are scoped by the trusted context, never by the arguments: in a group, the artifacts
of that group's conversations; in a 1:1 conversation, that conversation's; always the owner's.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.db.models.functions import Length

from garden.errors import QuotaExceeded
from garden.models import Artifact
from garden.providers.types import ToolSpec
from garden.storage import storage_hold
from garden.tools import Tool, ToolContext, ToolOutcome, register

MAX_CHARS = 200_000

FILE_WRITE = register(
    Tool(
        spec=ToolSpec(
            name="file.write",
            description="Write a text document (notes, a report, CSV) into the shared library. "
            "It appears on the Canvas, tagged with you.",
            parameters={
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "additionalProperties": False,
                "required": ["title", "content"],
                "properties": {
                    "title": {"type": "string", "minLength": 1, "maxLength": 200},
                    "content": {"type": "string", "maxLength": MAX_CHARS},
                    "kind": {
                        "type": "string",
                        "enum": ["document", "chart", "table"],
                        "default": "document",
                    },
                    "mime_type": {"type": "string", "maxLength": 100, "default": "text/plain"},
                },
            },
        ),
        handler=lambda ctx, args: file_write(ctx, args),
        meta={"describe": "write {title}", "describe_general": "write a document"},
    )
)


def keep_document(
    ctx: ToolContext, *, kind: str, title: str, mime_type: str, content: str
) -> Artifact | ToolOutcome:
    """Put a text document an agent made into its owner's library, tagged with the agent and
    its thread, under the owner's storage: the Artifact, or the refusal to answer the call
    with (STORAGE_FULL, rolled back: nothing written; the request goes on)."""
    try:
        with transaction.atomic():
            artifact = Artifact.objects.create(
                owner_id=ctx.owner_id,
                agent_id=ctx.agent_id,
                conversation_id=ctx.conversation_id,
                kind=kind,
                title=title.strip(),
                mime_type=mime_type,
                content=content,
                size=len(content.encode()),
            )
            storage_hold(owner_id=ctx.owner_id)
    except QuotaExceeded as refused:
        return ToolOutcome(f"{refused.code}: {refused.message}", is_error=True, code=refused.code)
    return artifact


def file_write(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    artifact = keep_document(
        ctx,
        kind=args.get("kind", "document"),
        title=args["title"],
        mime_type=args.get("mime_type", "text/plain"),
        content=args["content"],
    )
    if isinstance(artifact, ToolOutcome):
        return artifact
    return ToolOutcome(
        f"Wrote artifact {artifact.pk} ({artifact.kind}): {artifact.title}",
        artifacts=(artifact.pk,),
    )


LIST_LIMIT = 50
# What a page's header and continuation line take, kept out of the room's share for the text.
PAGE_OVERHEAD = 300
TEXT_TYPES = ("text/", "application/json", "application/csv", "application/xml")
# A structured type's suffix (RFC 6839) says it is JSON or XML, so text: a chart
# (application/vnd.garden.chart+json) reads as its data.
TEXT_SUFFIXES = ("+json", "+xml")

FILE_LIST = register(
    Tool(
        spec=ToolSpec(
            name="file.list",
            description="List the documents this group has made or kept (newest first), with "
            "their artifact numbers, to read one with file.read.",
            parameters={
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "query": {"type": "string", "maxLength": 100},
                    "limit": {"type": "integer", "minimum": 1, "maximum": LIST_LIMIT},
                },
            },
        ),
        handler=lambda ctx, args: file_list(ctx, args),
        meta={"describe": "list the group's documents"},
    )
)

FILE_READ = register(
    Tool(
        spec=ToolSpec(
            name="file.read",
            description="Read a document of this group by its artifact number, a page at a "
            "time: the answer says where the next page starts (offset).",
            parameters={
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "additionalProperties": False,
                "required": ["artifact"],
                "properties": {
                    "artifact": {"type": "integer", "minimum": 1, "maximum": 2**62},
                    "offset": {"type": "integer", "minimum": 0, "maximum": 2**31},
                    "length": {"type": "integer", "minimum": 1, "maximum": 2**31},
                },
            },
        ),
        handler=lambda ctx, args: file_read(ctx, args),
        meta={"describe": "read artifact {artifact}", "describe_general": "read a document"},
    )
)


def reachable_artifacts(ctx: ToolContext) -> QuerySet[Artifact]:
    """The artifacts a tool call in ``ctx`` may see: its group's, or its conversation's."""
    found = Artifact.objects.filter(owner_id=ctx.owner_id).select_related("agent")
    if ctx.group_id is not None:
        return found.filter(conversation__group_id=ctx.group_id)
    return found.filter(conversation_id=ctx.conversation_id)


def _line(artifact: Artifact, chars: int) -> str:
    by = f" · by @{artifact.agent.handle}" if artifact.agent else ""
    return (
        f"artifact {artifact.pk} · {artifact.kind} · {artifact.title!r}{by} · {chars:,} characters"
    )


def file_list(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    # Their lengths, not their texts: a listing never loads fifty documents.
    found = reachable_artifacts(ctx).defer("content").annotate(chars=Length("content"))
    found = found.order_by("-id")
    query = (args.get("query") or "").strip()
    if query:
        found = found.filter(title__icontains=query)
    limit = args.get("limit", 20)
    rows = list(found[: limit + 1])
    if not rows:
        return ToolOutcome(
            "No documents here yet." if not query else f"No documents match {query!r}."
        )
    lines = [_line(a, a.chars) for a in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"[more: narrow with query, or raise limit up to {LIST_LIMIT}]")
    return ToolOutcome("\n".join(lines))


def file_read(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    artifact_id = int(args["artifact"])
    artifact = reachable_artifacts(ctx).filter(pk=artifact_id).first()
    if artifact is None:
        # Another group's or owner's artifact reads exactly like one that does not exist.
        return ToolOutcome(
            f"ARTIFACT_NOT_FOUND: no artifact {artifact_id} in this group.",
            is_error=True,
            code="ARTIFACT_NOT_FOUND",
        )
    mime = artifact.mime_type.split(";")[0].strip()
    if not (mime.startswith(TEXT_TYPES) or mime.endswith(TEXT_SUFFIXES)):
        return ToolOutcome(
            f"NOT_TEXT: artifact {artifact.pk} is {artifact.mime_type}; it cannot be read as text.",
            is_error=True,
            code="NOT_TEXT",
        )
    text = artifact.content
    page = max(200, ctx.output_chars - PAGE_OVERHEAD)
    start = min(args.get("offset", 0), len(text))
    end = min(len(text), start + min(args.get("length", page), page))
    head = f"{_line(artifact, len(text))}; characters {start:,} to {end:,}:"
    tail = (
        f"\n[continues: {len(text) - end:,} characters more; read with offset {end}]"
        if end < len(text)
        else "\n[end of the document]"
    )
    return ToolOutcome(f"{head}\n{text[start:end]}{tail}")
