"""Adapter for the Anthropic messages wire format (``POST {base_url}/v1/messages``, default base
``https://api.anthropic.com``).
"""

from __future__ import annotations

from typing import Any

from ._http import HttpProvider, ToolNames, artifact_line, count, require
from .types import (
    ArtifactRef,
    Block,
    ChatMessage,
    ChatReply,
    ChatRequest,
    TextBlock,
    ToolCall,
    ToolResult,
    Usage,
)

API_VERSION = "2023-06-01"


class AnthropicProvider(HttpProvider):
    name = "anthropic"
    default_base_url = "https://api.anthropic.com"

    def _url(self) -> str:
        # Accept a base given with or without the version segment; both appear in the wild.
        base = self.base_url.removesuffix("/v1")
        return f"{base}/v1/messages"

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if self.config.api_key:
            headers["x-api-key"] = self.config.api_key
        return headers

    def _body(self, request: ChatRequest, names: ToolNames) -> dict[str, Any]:
        messages = [
            {"role": message.role, "content": blocks}
            for message in request.messages
            # The API rejects a message with no content blocks; an empty turn says nothing.
            if (blocks := _wire_blocks(message, names))
        ]
        body: dict[str, Any] = {
            "model": self.config.model,
            "max_tokens": request.max_tokens,
            "messages": messages,
        }
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = [
                {
                    "name": names.to_wire(spec.name),
                    "description": spec.description,
                    "input_schema": spec.parameters,
                }
                for spec in request.tools
            ]
        return body

    def _parse(self, data: dict[str, Any], names: ToolNames) -> ChatReply:
        blocks = require(data, "content", list, "anthropic reply")
        content: list[Block] = []
        for index, raw in enumerate(blocks):
            where = f"anthropic reply content[{index}]"
            kind = require(raw, "type", str, where)
            if kind == "text":
                text = require(raw, "text", str, where)
                if text:
                    content.append(TextBlock(text))
            elif kind == "tool_use":
                content.append(
                    ToolCall(
                        id=require(raw, "id", str, where),
                        name=names.from_wire(require(raw, "name", str, where)),
                        arguments=require(raw, "input", dict, where),
                    )
                )
            # Other block types (thinking, server tools) have no neutral form and are dropped.
        stop = data.get("stop_reason")
        usage = data.get("usage")
        return ChatReply(
            content=tuple(content),
            stop_reason=stop if isinstance(stop, str) and stop else "end_turn",
            usage=Usage(
                # Cached prompt tokens are reported apart from input_tokens; add them so the
                # figure means "whole prompt", as OpenAI's prompt_tokens does.
                input_tokens=count(
                    usage,
                    "input_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                ),
                output_tokens=count(usage, "output_tokens"),
            ),
        )


def _wire_blocks(message: ChatMessage, names: ToolNames) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            # The API rejects empty text blocks.
            if block.text:
                others.append({"type": "text", "text": block.text})
        elif isinstance(block, ArtifactRef):
            others.append({"type": "text", "text": artifact_line(block)})
        elif isinstance(block, ToolCall) and message.role == "assistant":
            others.append(
                {
                    "type": "tool_use",
                    "id": block.id,
                    "name": names.to_wire(block.name),
                    "input": block.arguments,
                }
            )
        elif isinstance(block, ToolResult) and message.role == "user":
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": block.call_id,
                    "content": block.content,
                    "is_error": block.is_error,
                }
            )
        else:
            raise ValueError(f"{block.type} block cannot appear in a {message.role} message")
    # tool_result blocks must open the user turn that follows the tool_use turn.
    return results + others
