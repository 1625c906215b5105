"""The spans of model and tool calls in the OpenTelemetry GenAI semantic conventions: what a
call asked for and what it came to, with its messages, arguments and results only when the
operator captures content (garden/telemetry.py ``model_call`` and ``tool_call`` start them
while traces are on)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode


class Call:
    """A span around one model call or one tool call, its outcome set by ``replied``/``done``;
    ``content`` is the most characters of a content attribute, 0 when content stays out."""

    __slots__ = ("_cm", "content", "span")

    def __init__(
        self,
        tracer: trace.Tracer,
        name: str,
        kind: SpanKind,
        attributes: dict[str, Any],
        *,
        content: int,
    ) -> None:
        self.content = content
        self._cm = tracer.start_as_current_span(
            name,
            kind=kind,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )

    def __enter__(self) -> Call:
        self.span = self._cm.__enter__()
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> Any:
        if exc is not None:
            self.span.set_attribute(
                "error.type", getattr(exc, "code", None) or type(exc).__qualname__
            )
            self.span.set_status(Status(StatusCode.ERROR))
        return self._cm.__exit__(kind, exc, tb)

    def replied(self, reply: Any) -> Any:
        """The model's reply: the tokens the provider reported, why it stopped."""
        usage = reply.usage
        self.span.set_attributes(
            {
                "gen_ai.usage.input_tokens": usage.input_tokens,
                "gen_ai.usage.output_tokens": usage.output_tokens,
                "gen_ai.response.finish_reasons": [reply.stop_reason],
            }
        )
        if self.content:
            self.span.set_attribute(
                "gen_ai.output.messages",
                _bounded([{"role": "assistant", "parts": _parts(reply.content)}], self.content),
            )
        return reply

    def done(self, outcome: Any) -> Any:
        """The tool's outcome (a garden.tools.ToolOutcome): ok, or the error's code."""
        self.span.set_attribute("garden.tool.outcome", "error" if outcome.is_error else "ok")
        if outcome.is_error:
            self.span.set_attribute("error.type", outcome.code or "TOOL_ERROR")
            self.span.set_status(Status(StatusCode.ERROR))
        if self.content:
            self.span.set_attribute(
                "gen_ai.tool.call.result", _bounded(outcome.content, self.content)
            )
        return outcome


def model_call(
    tracer: trace.Tracer,
    *,
    content: int,
    provider: str,
    model: str,
    agent: str,
    purpose: str = "",
    chat: Any = None,
) -> Call:
    """The ``chat {model}`` span of one model call; with ``content``, ``chat`` (a ChatRequest)
    is recorded as the input messages."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "gen_ai.agent.name": agent,
    }
    if purpose:
        attributes["garden.reservation.purpose"] = purpose
    if content and chat is not None:
        attributes["gen_ai.system_instructions"] = _bounded(chat.system, content)
        attributes["gen_ai.input.messages"] = _bounded(
            [{"role": m.role, "parts": _parts(m.content)} for m in chat.messages], content
        )
    # The name is bounded (an owner names the model; the attribute keeps it whole).
    return Call(tracer, f"chat {model[:80]}", SpanKind.CLIENT, attributes, content=content)


def tool_call(
    tracer: trace.Tracer, *, content: int, name: str, call_id: str, arguments: Any = None
) -> Call:
    """The ``execute_tool {name}`` span of one tool call; with ``content``, its arguments."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }
    if content and arguments is not None:
        attributes["gen_ai.tool.call.arguments"] = _bounded(arguments, content)
    return Call(tracer, f"execute_tool {name}", SpanKind.INTERNAL, attributes, content=content)


def _parts(blocks: Iterable[Any]) -> list[dict[str, Any]]:
    """Message blocks in the GenAI conventions' shape (no picture bytes)."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append({"type": "text", "content": block.text})
        elif kind == "tool_call":
            parts.append(
                {
                    "type": "tool_call",
                    "id": block.id,
                    "name": block.name,
                    "arguments": block.arguments,
                }
            )
        elif kind == "tool_result":
            parts.append(
                {"type": "tool_call_response", "id": block.call_id, "response": block.content}
            )
        else:
            parts.append({"type": str(kind), "title": getattr(block, "title", "")})
    return parts


def _bounded(value: Any, most: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    if len(text) > most:
        return text[:most] + "…"
    return text
