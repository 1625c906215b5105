"""The scripted provider: offline and deterministic, configured per account with rules.

``options`` of a scripted account::

    {"rules": [
        {"when": "spending|budget",          # regex on the last user-side text (optional)
         "after_tool_result": false,         # match only when the last message holds results
         "turn": 0,                          # match only at this count of assistant messages
         "reply": {"text": "...", "tool_calls": [{"name": "group.ask", "arguments": {...}}]}},
        {"error": "rejected" | "ambiguous" | "timeout" | "malformed"}
     ],
     "default": "Understood.",
     "delay": 0.0}

The first matching rule answers. The same request always gets the same reply, including tool
call ids, so a redelivered step sees what the first delivery saw.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import Any

from .types import (
    AccountConfig,
    ChatReply,
    ChatRequest,
    ConfirmedRejection,
    MalformedReply,
    ProviderConfigError,
    ProviderServerError,
    ProviderTimeout,
    TextBlock,
    ToolCall,
    ToolResult,
)

_ERRORS = {
    "rejected": lambda: ConfirmedRejection("scripted rejection", status=429, retry_after=0.0),
    "ambiguous": lambda: ProviderServerError("scripted server error", status=500),
    "timeout": lambda: ProviderTimeout("scripted timeout"),
    "malformed": lambda: MalformedReply("scripted malformed reply"),
}


class ScriptedProvider:
    def __init__(self, config: AccountConfig) -> None:
        self.options = config.options or {}
        rules = self.options.get("rules", [])
        if not isinstance(rules, list):
            raise ProviderConfigError("scripted options.rules must be a list")
        self.rules: list[dict[str, Any]] = rules

    def complete(self, request: ChatRequest) -> ChatReply:
        delay = float(self.options.get("delay", 0) or 0)
        if delay:
            time.sleep(delay)
        last = request.messages[-1] if request.messages else None
        last_text = last.text if last and last.role == "user" else ""
        after_results = bool(last and any(isinstance(b, ToolResult) for b in last.content))
        assistant_turns = sum(1 for m in request.messages if m.role == "assistant")
        for rule in self.rules:
            if not _matches(rule, last_text, after_results, assistant_turns):
                continue
            if "error" in rule:
                make = _ERRORS.get(rule["error"])
                if make is None:
                    raise ProviderConfigError(f"unknown scripted error {rule['error']!r}")
                raise make()
            return _reply(rule.get("reply", {}), request)
        return ChatReply(content=(TextBlock(self.options.get("default", "Understood.")),))


def _matches(rule: dict[str, Any], last_text: str, after_results: bool, turns: int) -> bool:
    if "when" in rule and not re.search(rule["when"], last_text, re.IGNORECASE | re.DOTALL):
        return False
    if "after_tool_result" in rule and bool(rule["after_tool_result"]) != after_results:
        return False
    return not ("turn" in rule and int(rule["turn"]) != turns)


def _reply(spec: dict[str, Any] | str, request: ChatRequest) -> ChatReply:
    if isinstance(spec, str):
        spec = {"text": spec}
    digest = hashlib.sha1(
        json.dumps([[m.role, repr(m.content)] for m in request.messages]).encode()
    ).hexdigest()[:12]
    blocks: list[Any] = []
    if spec.get("text"):
        blocks.append(TextBlock(spec["text"]))
    for i, call in enumerate(spec.get("tool_calls", [])):
        blocks.append(
            ToolCall(id=f"call_{digest}_{i}", name=call["name"], arguments=call.get("arguments", {}))
        )
    stop = "tool_use" if spec.get("tool_calls") else "end_turn"
    return ChatReply(content=tuple(blocks) or (TextBlock(""),), stop_reason=stop)
