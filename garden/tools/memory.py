"""memory.remember and memory.recall: notes and preferences whose scope comes only from the
trusted run context.

In a group run every write lands in the group's scope and a recall reads only the owner's
shared scope and the group's; outside a group, an agent writes to its private scope and
reads private + shared. A scope, group or agent id in the arguments is refused by name.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from garden.errors import QuotaExceeded
from garden.models import MemoryNote
from garden.providers.types import ToolSpec
from garden.storage import storage_hold
from garden.tools import Tool, ToolContext, ToolOutcome, register

SCOPE_KEYS = {
    "scope",
    "group",
    "group_id",
    "agent",
    "agent_id",
    "owner",
    "owner_id",
    "private",
    "shared",
}
MAX_RECALL = 50


def write_scope(ctx: ToolContext) -> str:
    return f"group:{ctx.group_id}" if ctx.group_id else f"private:{ctx.agent_id}"


def read_scopes(ctx: ToolContext) -> list[str]:
    own = f"group:{ctx.group_id}" if ctx.group_id else f"private:{ctx.agent_id}"
    return [f"shared:{ctx.owner_id}", own]


def _refuse_scope(args: dict[str, Any]) -> ToolOutcome | None:
    named = sorted(SCOPE_KEYS & set(args))
    if named:
        return ToolOutcome(
            f"MEMORY_SCOPE_NOT_ALLOWED: the memory scope comes from where you are running, never "
            f"from arguments (got {', '.join(named)}).",
            is_error=True,
            code="MEMORY_SCOPE_NOT_ALLOWED",
        )
    return None


def remember(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    refused = _refuse_scope(args)
    if refused:
        return refused
    try:
        with transaction.atomic():
            note = MemoryNote.objects.create(
                owner_id=ctx.owner_id,
                scope=write_scope(ctx),
                kind=args.get("kind", "note"),
                text=args["text"].strip(),
                written_by_id=ctx.agent_id,
            )
            storage_hold(owner_id=ctx.owner_id)
    except QuotaExceeded as refused:
        # Rolled back: nothing written. The agent is told why, and the request goes on.
        return ToolOutcome(f"{refused.code}: {refused.message}", is_error=True, code=refused.code)
    where = "the group's memory" if ctx.group_id else "your private memory"
    return ToolOutcome(f"Remembered in {where} (note {note.pk}).")


def recall(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    refused = _refuse_scope(args)
    if refused:
        return refused
    notes = MemoryNote.objects.filter(owner_id=ctx.owner_id, scope__in=read_scopes(ctx))
    if args.get("query"):
        notes = notes.filter(text__icontains=args["query"])
    if args.get("kind"):
        notes = notes.filter(kind=args["kind"])
    found = list(notes.order_by("-id")[:MAX_RECALL])
    if not found:
        return ToolOutcome("Nothing remembered matches.")
    return ToolOutcome("\n".join(f"- [{n.kind}] {n.text}" for n in reversed(found)))


_ARGS_COMMON: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
}

MEMORY_REMEMBER = register(
    Tool(
        spec=ToolSpec(
            name="memory.remember",
            description="Keep a durable note or preference. In a group it is the group's memory, "
            "seen by the room.",
            parameters={
                **_ARGS_COMMON,
                "required": ["text"],
                "properties": {
                    "text": {"type": "string", "minLength": 1, "maxLength": 4000},
                    "kind": {"type": "string", "enum": ["note", "preference"], "default": "note"},
                },
            },
        ),
        handler=remember,
        meta={"describe": "remember a note"},
    )
)

MEMORY_RECALL = register(
    Tool(
        spec=ToolSpec(
            name="memory.recall",
            description="Recall remembered notes and preferences, optionally matching a query.",
            parameters={
                **_ARGS_COMMON,
                "properties": {
                    "query": {"type": "string", "maxLength": 200},
                    "kind": {"type": "string", "enum": ["note", "preference"]},
                },
            },
        ),
        handler=recall,
        meta={"describe": "look through the memory"},
    )
)
