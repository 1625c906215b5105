"""Conversion between stored content blocks (JSON on Message.content) and the neutral types."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from garden.providers.types import ArtifactRef, Block, TextBlock, ToolCall, ToolResult


def block_from_json(data: dict[str, Any]) -> Block:
    kind = data.get("type")
    if kind == "text":
        return TextBlock(str(data.get("text", "")))
    if kind == "tool_call":
        return ToolCall(
            id=str(data["id"]), name=str(data["name"]), arguments=dict(data.get("arguments") or {})
        )
    if kind == "tool_result":
        return ToolResult(
            call_id=str(data["call_id"]),
            content=str(data.get("content", "")),
            is_error=bool(data.get("is_error", False)),
        )
    if kind == "artifact_ref":
        return ArtifactRef(
            artifact_id=str(data["artifact_id"]),
            kind=str(data.get("kind", "document")),
            title=str(data.get("title", "")),
        )
    raise ValueError(f"unknown content block type {kind!r}")


def block_to_json(block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolCall):
        return {
            "type": "tool_call",
            "id": block.id,
            "name": block.name,
            "arguments": block.arguments,
        }
    if isinstance(block, ToolResult):
        return {
            "type": "tool_result",
            "call_id": block.call_id,
            "content": block.content,
            "is_error": block.is_error,
        }
    if isinstance(block, ArtifactRef):
        return {
            "type": "artifact_ref",
            "artifact_id": block.artifact_id,
            "kind": block.kind,
            "title": block.title,
        }
    raise TypeError(f"not a content block: {block!r}")


def blocks_from_json(data: Iterable[dict[str, Any]]) -> tuple[Block, ...]:
    return tuple(block_from_json(b) for b in data)


def blocks_to_json(blocks: Iterable[Block]) -> list[dict[str, Any]]:
    return [block_to_json(b) for b in blocks if not (isinstance(b, TextBlock) and not b.text)]
