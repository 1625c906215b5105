"""file.write: an agent writes a document into the library as an Artifact (a side effect)."""

from __future__ import annotations

from typing import Any

from garden.models import Artifact
from garden.providers.types import ToolSpec
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
    )
)


def file_write(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    artifact = Artifact.objects.create(
        owner_id=ctx.owner_id,
        agent_id=ctx.agent_id,
        conversation_id=ctx.conversation_id,
        kind=args.get("kind", "document"),
        title=args["title"].strip(),
        mime_type=args.get("mime_type", "text/plain"),
        content=args["content"],
        size=len(args["content"].encode()),
    )
    return ToolOutcome(
        f"Wrote artifact {artifact.pk} ({artifact.kind}): {artifact.title}",
        artifacts=(artifact.pk,),
    )
