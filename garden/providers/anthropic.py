"""Adapter for the Anthropic messages wire format (``POST {base_url}/v1/messages``, default base
``https://api.anthropic.com``).
"""

from __future__ import annotations

from typing import Any

from ._http import HttpProvider
from ._stream import StreamAssembler
from ._wire import ToolNames, artifact_line, base64_data, count, inline, parse_arguments, require
from .types import (
    ArtifactRef,
    Block,
    ChatMessage,
    ChatReply,
    ChatRequest,
    MalformedReply,
    ProviderServerError,
    TextBlock,
    TextSink,
    ToolCall,
    ToolResult,
    Usage,
)

API_VERSION = "2023-06-01"
PDF = "application/pdf"


class AnthropicProvider(HttpProvider):
    name = "anthropic"
    default_base_url = "https://api.anthropic.com"
    # Pictures as image blocks, PDFs as document blocks, both with a base64 source.
    media_types = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", PDF})

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
            if (blocks := _wire_blocks(message, names, self.media))
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

    def _assembler(self, on_text: TextSink) -> StreamAssembler:
        return _EventAssembler(on_text)

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


class _EventAssembler(StreamAssembler):
    """A streamed message: ``message_start`` (the usage so far), each content block opened by
    ``content_block_start`` and grown by ``content_block_delta`` (``text_delta``,
    ``input_json_delta``), ``message_delta`` (stop reason, final usage), ``message_stop``.
    ``ping`` and block types with no neutral form are skipped; an ``error`` event means the
    model ran and failed."""

    def __init__(self, on_text: TextSink) -> None:
        super().__init__(on_text)
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        # Each text block's pieces, joined once at the end.
        self._texts: dict[int, list[str]] = {}
        self._usage: dict[str, Any] = {}
        self._stop: str | None = None
        self._done = False
        self._text_block: int | None = None  # the block the last text came from

    def feed(self, event: str, data: Any) -> bool:
        if not isinstance(data, dict):
            raise MalformedReply(f"anthropic stream: {event} data is {type(data).__name__}")
        kind = data.get("type") or event
        where = f"anthropic stream {kind}"
        if kind == "message_start":
            usage = require(data, "message", dict, where).get("usage")
            self._usage.update(usage if isinstance(usage, dict) else {})
        elif kind == "content_block_start":
            index = require(data, "index", int, where)
            self._blocks[index] = dict(require(data, "content_block", dict, where))
            self._texts[index] = []
            self._text(index, self._blocks[index].get("text"))
        elif kind == "content_block_delta":
            self._delta(require(data, "index", int, where), require(data, "delta", dict, where))
        elif kind == "message_delta":
            delta, usage = data.get("delta"), data.get("usage")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                self._stop = delta["stop_reason"]
            # Counts here are running totals, so they replace those of message_start.
            self._usage.update(usage if isinstance(usage, dict) else {})
        elif kind == "message_stop":
            self._done = True
            return True
        elif kind == "error":
            raise ProviderServerError(
                f"anthropic: the stream failed: {str(data.get('error'))[:500]}"
            )
        return False

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self._blocks.get(index)
        if block is None:
            raise MalformedReply(f"anthropic stream: a delta for block {index}, never started")
        where = f"anthropic stream content[{index}]"
        kind = delta.get("type")
        if kind == "text_delta":
            self._text(index, require(delta, "text", str, where))
        elif kind == "input_json_delta":
            partial = require(delta, "partial_json", str, where)
            self.grow(partial)
            self._json.setdefault(index, []).append(partial)

    def _text(self, index: int, text: Any) -> None:
        if not isinstance(text, str) or not text:
            return
        self.grow(text)
        self._texts.setdefault(index, []).append(text)
        # The reply's text joins its text blocks with a newline; so do the pieces.
        if self._text_block is not None and self._text_block != index:
            text = "\n" + text
        self._text_block = index
        self.on_text(text)

    def data(self) -> dict[str, Any]:
        if not self._done and self._stop is None:
            raise MalformedReply("anthropic stream ended before the reply finished")
        content = []
        for index, block in sorted(self._blocks.items()):
            if block.get("type") == "text":
                block = {**block, "text": "".join(self._texts.get(index, []))}
            if block.get("type") == "tool_use":
                parts = self._json.get(index)
                raw = "".join(parts) if parts else block.get("input")
                block = {
                    **block,
                    "input": parse_arguments(raw, f"anthropic stream content[{index}]"),
                }
            content.append(block)
        return {"content": content, "stop_reason": self._stop, "usage": self._usage}


def _wire_blocks(
    message: ChatMessage, names: ToolNames, media: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            # The API rejects empty text blocks.
            if block.text:
                others.append({"type": "text", "text": block.text})
        elif isinstance(block, ArtifactRef):
            others.append({"type": "text", "text": artifact_line(block)})
            if message.role == "user" and inline(block, media):
                others.append(_media_block(block))
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


def _media_block(ref: ArtifactRef) -> dict[str, Any]:
    """A picture as an image block, a PDF as a document block, after its reference line."""
    source = {"type": "base64", "media_type": ref.media_type, "data": base64_data(ref)}
    if ref.media_type == PDF:
        return {"type": "document", "source": source, "title": ref.title}
    return {"type": "image", "source": source}
