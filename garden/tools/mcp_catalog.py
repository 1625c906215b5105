"""What garden keeps of an MCP server's ``tools/list``, and the names its tools go by: each
tool is ``mcp.<server>.<tool>`` to an agent, and is offered to a model only when its name
survives the providers' wire form and its input schema is one garden can apply."""

from __future__ import annotations

import re
from typing import Any

import jsonschema

from garden import mcp_client
from garden.tools.schema_limits import schema_refusal

PREFIX = "mcp."
SERVER_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,18}[a-z0-9])?$")
# A tool's name must survive the providers' wire form (``.`` → ``__``, at most 64 characters
# of letters, digits, ``_`` and ``-``) and map back exactly: no dots, no double underscore.
TOOL_NAME = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")
MAX_DESCRIPTION = 1_000
MAX_WIRE_NAME = 64


def tool_name(server: str, tool: str) -> str:
    return f"{PREFIX}{server}.{tool}"


def split_name(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` of ``mcp.<server>.<tool>``, or None."""
    if not name.startswith(PREFIX):
        return None
    server, dot, tool = name[len(PREFIX) :].partition(".")
    return (server, tool) if dot and server and tool else None


def usable(server: str, listed: dict[str, Any]) -> str | None:
    """Why a listed tool cannot be offered to a model, or None when it can."""
    name = listed.get("name", "")
    if not TOOL_NAME.match(name):
        return "its name is not letters, digits, single underscores and dashes"
    if len(f"mcp__{server}__{name}") > MAX_WIRE_NAME:
        return f"its name is too long (at most {MAX_WIRE_NAME} characters with the server's)"
    schema = listed.get("input_schema")
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return "its input schema is not an object schema"
    # Its size, parts, patterns, depth, references and composition, within limits before
    # anything else reads it (garden.tools.schema_limits).
    why = schema_refusal(schema) or _unsupported(schema)
    if why:
        return why
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"its input schema is not valid JSON Schema ({exc.message})"
    return None


def _unsupported(node: Any) -> str | None:
    """What of a schema garden does not apply: a reference outside the schema (it would be
    fetched) and ``patternProperties`` (its patterns would be matched without a time bound);
    ``pattern`` itself is matched within one (``garden.tools``)."""
    if isinstance(node, list):
        return next((why for why in map(_unsupported, node) if why), None)
    if not isinstance(node, dict):
        return None
    for key in ("$ref", "$dynamicRef", "$recursiveRef"):
        ref = node.get(key)
        if isinstance(ref, str) and not ref.startswith("#"):
            return f"its input schema refers outside itself ({key} {ref[:100]!r})"
    if "patternProperties" in node:
        return "its input schema uses patternProperties"
    return next((why for why in map(_unsupported, node.values()) if why), None)


def listed_as_json(tools: list[mcp_client.ListedTool], server: str) -> list[dict[str, Any]]:
    """What is kept of a server's ``tools/list``: each tool with its description clipped, and
    a tool that cannot be offered marked with why (``unusable``)."""
    kept = []
    for tool in tools:
        entry = {
            "name": tool.name[:200],
            "description": tool.description[:MAX_DESCRIPTION],
            "input_schema": tool.input_schema,
            "annotations": {
                k: v
                for k, v in tool.annotations.items()
                if k
                in ("title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
            },
        }
        why = usable(server, entry)
        if why:
            entry["input_schema"] = {}
            entry["unusable"] = why
        kept.append(entry)
    return kept
