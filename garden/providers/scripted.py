"""The scripted provider: offline and deterministic, configured per account with rules.

``options`` of a scripted account (checked against ``OPTIONS_SCHEMA``)::

    {"rules": [
        {"when": "spending|budget",          # phrases separated by |, matched as plain text,
                                             # case-insensitively, in the last user-side text
         "after_tool_result": false,         # match only when the last message holds results
         "after_tool_error": false,          # ... holds a result that is an error (a rejection)
         "turn": 0,                          # match only at this count of assistant messages
         "capture": {"name": "called|named"},  # {name}: the words after a phrase (below)
         "reply": {"text": "...", "tool_calls": [{"name": "group.ask", "arguments": {...}}]}},
        {"error": "rejected" | "ambiguous" | "timeout" | "malformed"}
     ],
     "default": "Understood.",
     "delay": 0.0}                           # seconds, at most the account's timeout

The first matching rule answers. The same request always gets the same reply, including tool
call ids, so a redelivered step sees what the first delivery saw. Scripted accounts are a
development and demo tool: ``when`` is never a regular expression (an owner's pattern must
not be able to backtrack for minutes in a shared worker), and a ``delay`` longer than the
timeout ends as a timeout, like a slow real provider. Streamed (``on_text``), the reply's
text comes in a few pieces spread over the delay, the same pieces every time.

A reply's text and the string values of its tool calls' arguments may name what the rule
saw (``garden.providers.script_fill``): ``{error}`` (the error results of the last message),
``{result}`` and ``{result.agent.name}`` (its first result, whole or a field of its JSON),
and each ``capture`` (``{name}``, or ``{name:handle}`` made into a handle). A rule whose
reply names something the request does not hold does not match, so the next rule answers:
a script never says "Done: made X" over a result that made nothing.
"""

from __future__ import annotations

import hashlib
import json
import time
from functools import cache
from typing import Any

import jsonschema

from .script_fill import CAPTURE_NAME, Unfilled, captures, fill
from .types import (
    AccountConfig,
    ChatReply,
    ChatRequest,
    ConfirmedRejection,
    MalformedReply,
    ProviderConfigError,
    ProviderError,
    ProviderServerError,
    ProviderTimeout,
    TextBlock,
    TextSink,
    ToolCall,
    ToolResult,
)

_ERRORS = {
    "rejected": lambda: ConfirmedRejection("scripted rejection", status=429, retry_after=0.0),
    "ambiguous": lambda: ProviderServerError("scripted server error", status=500),
    "timeout": lambda: ProviderTimeout("scripted timeout"),
    "malformed": lambda: MalformedReply("scripted malformed reply"),
}


_TEXT = {"type": "string", "maxLength": 20_000}
_REPLY = {
    "oneOf": [
        _TEXT,
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "text": _TEXT,
                "tool_calls": {
                    "type": "array",
                    "maxItems": 10,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1, "maxLength": 80},
                            "arguments": {"type": "object", "maxProperties": 50},
                        },
                    },
                },
            },
        },
    ]
}
OPTIONS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "rules": {
            "type": "array",
            "maxItems": 100,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "when": {"type": "string", "maxLength": 500},
                    "after_tool_result": {"type": "boolean"},
                    "after_tool_error": {"type": "boolean"},
                    "turn": {"type": "integer", "minimum": 0, "maximum": 1000},
                    "capture": {
                        "type": "object",
                        "maxProperties": 5,
                        "propertyNames": {"pattern": CAPTURE_NAME},
                        "additionalProperties": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 500,
                        },
                    },
                    "reply": _REPLY,
                    "error": {"enum": sorted(_ERRORS)},
                },
            },
        },
        "default": _TEXT,
        "delay": {"type": "number", "minimum": 0},
    },
}


@cache
def _options_validator() -> Any:
    cls = jsonschema.validators.validator_for(OPTIONS_SCHEMA)
    cls.check_schema(OPTIONS_SCHEMA)
    return cls(OPTIONS_SCHEMA)


def options_problem(options: Any) -> str | None:
    """The first way ``options`` break the scripted schema, as ``path: message``; or None."""
    error = jsonschema.exceptions.best_match(_options_validator().iter_errors(options))
    if error is None:
        return None
    path = "/".join(str(p) for p in error.absolute_path) or "options"
    return f"{path}: {error.message[:200]}"


class ScriptedProvider:
    def __init__(self, config: AccountConfig) -> None:
        self.options = config.options or {}
        problem = options_problem(self.options)
        if problem:
            raise ProviderConfigError(f"scripted options are invalid: {problem}")
        self.rules: list[dict[str, Any]] = self.options.get("rules", [])
        self.timeout = config.timeout

    def complete(self, request: ChatRequest, *, on_text: TextSink | None = None) -> ChatReply:
        delay = float(self.options.get("delay", 0) or 0)
        if delay >= self.timeout:
            # A real provider this slow would time out; so does the script, at the timeout.
            time.sleep(self.timeout)
            raise ProviderTimeout(
                f"scripted delay {delay:g} s exceeds the timeout {self.timeout:g} s"
            )
        try:
            reply = self._answer(request)
        except ProviderError:
            if delay:
                time.sleep(delay)
            raise
        pieces = text_pieces(reply.text) if on_text is not None else [""]
        for piece in pieces:
            if delay:
                time.sleep(delay / len(pieces))
            if piece and on_text is not None:
                on_text(piece)
        return reply

    def _answer(self, request: ChatRequest) -> ChatReply:
        last = request.messages[-1] if request.messages else None
        last_text = last.text if last and last.role == "user" else ""
        results = [b for b in last.content if isinstance(b, ToolResult)] if last else []
        after_errors = any(b.is_error for b in results)
        assistant_turns = sum(1 for m in request.messages if m.role == "assistant")
        for rule in self.rules:
            if not _matches(rule, last_text, bool(results), after_errors, assistant_turns):
                continue
            captured = captures(rule.get("capture", {}), last_text)
            if captured is None:
                continue  # a phrase to capture after is not there, or nothing follows it
            if "error" in rule:
                make = _ERRORS.get(rule["error"])
                if make is None:
                    raise ProviderConfigError(f"unknown scripted error {rule['error']!r}")
                raise make()
            try:
                spec = fill(rule.get("reply", {}), captured=captured, results=results)
            except Unfilled:
                continue
            return _reply(spec, request)
        return ChatReply(content=(TextBlock(self.options.get("default", "Understood.")),))


# A streamed scripted reply comes in at most this many pieces.
STREAM_PIECES = 6


def text_pieces(text: str) -> list[str]:
    """``text`` cut at word boundaries into at most STREAM_PIECES pieces that join back into
    it exactly (an empty text is one empty piece)."""
    words = text.split(" ")
    size = -(-len(words) // STREAM_PIECES)  # ceiling division
    return [
        " ".join(words[i : i + size]) + (" " if i + size < len(words) else "")
        for i in range(0, len(words), size)
    ]


def phrases_match(when: str, text: str) -> bool:
    """``when`` is phrases separated by ``|``; any of them found in ``text``, ignoring case.
    Linear in the text: no pattern an owner writes can make it backtrack."""
    folded = text.casefold()
    return any(p and p in folded for p in (part.strip().casefold() for part in when.split("|")))


def _matches(
    rule: dict[str, Any], last_text: str, after_results: bool, after_errors: bool, turns: int
) -> bool:
    if "when" in rule and not phrases_match(rule["when"], last_text):
        return False
    if "after_tool_result" in rule and bool(rule["after_tool_result"]) != after_results:
        return False
    if "after_tool_error" in rule and bool(rule["after_tool_error"]) != after_errors:
        return False
    return not ("turn" in rule and int(rule["turn"]) != turns)


def _reply(spec: dict[str, Any] | str, request: ChatRequest) -> ChatReply:
    if isinstance(spec, str):
        spec = {"text": spec}
    # Call ids are deterministic: the conversation's length and its last messages (not the
    # whole of it, so a reply costs the same in a long thread as in a short one).
    digest = hashlib.sha1(
        json.dumps(
            [len(request.messages), *([m.role, repr(m.content)] for m in request.messages[-3:])]
        ).encode()
    ).hexdigest()[:12]
    blocks: list[Any] = []
    if spec.get("text"):
        blocks.append(TextBlock(spec["text"]))
    for i, call in enumerate(spec.get("tool_calls", [])):
        blocks.append(
            ToolCall(
                id=f"call_{digest}_{i}", name=call["name"], arguments=call.get("arguments", {})
            )
        )
    stop = "tool_use" if spec.get("tool_calls") else "end_turn"
    return ChatReply(content=tuple(blocks) or (TextBlock(""),), stop_reason=stop)
