"""Adapter for the OpenAI chat-completions wire format, spoken by OpenAI, Ollama, vLLM and
llama.cpp; ``base_url`` is the endpoint's ``/v1`` root (default ``https://api.openai.com/v1``).
"""

from __future__ import annotations

import json
import uuid
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

# finish_reason values translated to the neutral vocabulary (the Anthropic one, which
# ChatReply defaults to) so a reply reads the same whichever provider produced it.
_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


class OpenAIProvider(HttpProvider):
    name = "openai"
    default_base_url = "https://api.openai.com/v1"
    # Pictures as image_url parts (data: URLs); PDFs stay references, which every
    # OpenAI-compatible server (Ollama, vLLM, llama.cpp) reads.
    media_types = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

    def _url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _headers(self) -> dict[str, str]:
        # Local servers (Ollama, llama.cpp) run without a key; send no header rather than
        # an empty bearer token some of them reject.
        if self.config.api_key:
            return {"Authorization": f"Bearer {self.config.api_key}"}
        return {}

    def _body(self, request: ChatRequest, names: ToolNames) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for message in request.messages:
            messages.extend(_wire_messages(message, names, self.media))
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "max_tokens": request.max_tokens,
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": names.to_wire(spec.name),
                        "description": spec.description,
                        "parameters": spec.parameters,
                    },
                }
                for spec in request.tools
            ]
        return body

    def _stream_fields(self) -> dict[str, Any]:
        # Without include_usage a streamed reply carries no token counts.
        return {"stream": True, "stream_options": {"include_usage": True}}

    def _assembler(self, on_text: TextSink) -> StreamAssembler:
        return _ChunkAssembler(on_text)

    def _parse(self, data: dict[str, Any], names: ToolNames) -> ChatReply:
        choices = require(data, "choices", list, "openai reply")
        if not choices:
            raise MalformedReply("openai reply: no choices")
        choice = choices[0]
        message = require(choice, "message", dict, "openai reply choices[0]")
        content: list[Block] = []
        text = _reply_text(message.get("content"))
        if text:
            content.append(TextBlock(text))
        raw_calls = message.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise MalformedReply("openai reply: tool_calls is not a list")
        for index, raw in enumerate(raw_calls):
            where = f"openai reply tool_calls[{index}]"
            function = require(raw, "function", dict, where)
            call_id = raw.get("id")
            if not isinstance(call_id, str) or not call_id:
                # Some local servers omit ids; a fresh one keeps call and result pairable.
                call_id = f"call_{uuid.uuid4().hex[:24]}"
            content.append(
                ToolCall(
                    id=call_id,
                    name=names.from_wire(require(function, "name", str, where)),
                    arguments=parse_arguments(function.get("arguments"), where),
                )
            )
        finish = choice.get("finish_reason")
        stop_reason = _STOP_REASONS.get(finish, finish) if isinstance(finish, str) else None
        usage = data.get("usage")
        return ChatReply(
            content=tuple(content),
            stop_reason=stop_reason or ("tool_use" if raw_calls else "end_turn"),
            usage=Usage(
                input_tokens=count(usage, "prompt_tokens"),
                output_tokens=count(usage, "completion_tokens"),
            ),
        )


class _ChunkAssembler(StreamAssembler):
    """A streamed chat completion: text deltas, tool calls whose pieces arrive by index, the
    finish reason, and the usage in a last chunk of its own (``include_usage``); the stream
    ends with ``data: [DONE]``."""

    def __init__(self, on_text: TextSink) -> None:
        super().__init__(on_text)
        self._text: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._usage: dict[str, Any] | None = None
        self._done = False

    def feed(self, event: str, data: Any) -> bool:
        if data == "[DONE]":
            self._done = True
            return True
        if not isinstance(data, dict):
            raise MalformedReply(f"openai stream: a chunk is {type(data).__name__}")
        if data.get("error") and not data.get("choices"):
            # An error after the 200 (a server that fails mid-generation): the model ran.
            raise ProviderServerError(f"openai: the stream failed: {str(data['error'])[:500]}")
        if isinstance(data.get("usage"), dict):
            self._usage = data["usage"]
        choices = data.get("choices") or []
        if not isinstance(choices, list):
            raise MalformedReply("openai stream: choices is not a list")
        for choice in choices:
            # Only the first choice is read, as in the non-streamed reply.
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)
        return False

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise MalformedReply("openai stream: delta is not an object")
        text = _reply_text(delta.get("content"))
        if text:
            self.grow(text)
            self._text.append(text)
            self.on_text(text)
        calls = delta.get("tool_calls") or []
        if not isinstance(calls, list):
            raise MalformedReply("openai stream: tool_calls is not a list")
        for raw in calls:
            if not isinstance(raw, dict):
                raise MalformedReply("openai stream: a tool call delta is not an object")
            index = raw.get("index", len(self._calls))
            # Names and arguments grow piece by piece: kept as lists, joined once at the end.
            call = self._calls.setdefault(index, {"id": "", "name": [], "arguments": []})
            if isinstance(raw.get("id"), str) and raw["id"]:
                self.grow(raw["id"])
                call["id"] = raw["id"]
            function = raw.get("function") or {}
            if not isinstance(function, dict):
                raise MalformedReply("openai stream: a tool call's function is not an object")
            if isinstance(function.get("name"), str):
                self.grow(function["name"])
                call["name"].append(function["name"])
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                self.grow(arguments)
                call["arguments"].append(arguments)
            elif isinstance(arguments, dict):  # some servers send the object whole
                whole = json.dumps(arguments)
                self.grow(whole)
                call["arguments"] = [whole]
        finish = choice.get("finish_reason")
        if isinstance(finish, str) and finish:
            self._finish = finish

    def data(self) -> dict[str, Any]:
        # A server that closes the stream after the finish reason without [DONE] still
        # finished the reply; one that closes before it did not.
        if not self._done and self._finish is None:
            raise MalformedReply("openai stream ended before the reply finished")
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
        if self._calls:
            message["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {
                        "name": "".join(call["name"]),
                        "arguments": "".join(call["arguments"]),
                    },
                }
                for _, call in sorted(self._calls.items())
            ]
        choice = {"index": 0, "message": message, "finish_reason": self._finish}
        return {"choices": [choice], "usage": self._usage}


def _wire_messages(
    message: ChatMessage, names: ToolNames, media: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    """One neutral message as chat-completions messages (a user turn may become several).

    A user turn with a picture among ``media`` carries its content as a list of parts: text,
    and each picture as an ``image_url`` part (a data: URL) after its reference line."""
    lines: list[str] = []
    # The user turn's parts in order: text lines, and the pictures that follow their lines.
    parts: list[str | ArtifactRef] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            lines.append(block.text)
            parts.append(block.text)
        elif isinstance(block, ArtifactRef):
            lines.append(artifact_line(block))
            parts.append(artifact_line(block))
            if message.role == "user" and inline(block, media):
                parts.append(block)
        elif isinstance(block, ToolCall) and message.role == "assistant":
            calls.append(
                {
                    "id": block.id,
                    "type": "function",
                    "function": {
                        "name": names.to_wire(block.name),
                        "arguments": json.dumps(block.arguments),
                    },
                }
            )
        elif isinstance(block, ToolResult) and message.role == "user":
            # Tool messages have no error flag; say it in the text so the model still knows.
            body = f"Error: {block.content}" if block.is_error else block.content
            results.append({"role": "tool", "tool_call_id": block.call_id, "content": body})
        else:
            raise ValueError(f"{block.type} block cannot appear in a {message.role} message")
    text = "\n".join(lines)
    if message.role == "assistant":
        wire: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            # null, not "", is what the API documents for a pure tool-call turn.
            wire["content"] = text or None
            wire["tool_calls"] = calls
        return [wire]
    # Tool messages first: the API requires them right after the assistant turn whose
    # tool_calls they answer, so user text of the same turn must follow them.
    if len(parts) > len(lines):
        results.append({"role": "user", "content": _content_parts(parts)})
    elif lines or not results:
        results.append({"role": "user", "content": text})
    return results


def _content_parts(parts: list[str | ArtifactRef]) -> list[dict[str, Any]]:
    """Neighbouring text lines as one text part, each picture as an image_url part."""
    out: list[dict[str, Any]] = []
    held: list[str] = []
    for part in [*parts, None]:
        if isinstance(part, str):
            held.append(part)
            continue
        if held:
            out.append({"type": "text", "text": "\n".join(held)})
            held = []
        if part is not None:
            url = f"data:{part.media_type};base64,{base64_data(part)}"
            out.append({"type": "image_url", "image_url": {"url": url}})
    return out


def _reply_text(raw: Any) -> str:
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    # A few servers return content as a list of typed parts, like the request form.
    if isinstance(raw, list):
        return "".join(
            part["text"]
            for part in raw
            if isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        )
    raise MalformedReply(f"openai reply: message content is {type(raw).__name__}")
