"""Provider replies as the wire carries them, built in one place."""

from __future__ import annotations

import json
from typing import Any


def openai_reply(
    content: str | None = None,
    tool_calls: list[tuple[str, str, dict]] | tuple = (),
    *,
    usage: tuple[int, int] | None = (1, 1),
) -> dict[str, Any]:
    """A chat-completions answer; each tool call is ``(id, dotted name, arguments)``;
    ``usage`` is (prompt tokens, completion tokens), or None for an answer without it."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name.replace(".", "__"), "arguments": json.dumps(args)},
            }
            for call_id, name, args in tool_calls
        ]
    reply: dict[str, Any] = {
        "choices": [{"message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}]
    }
    if usage is not None:
        reply["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
    return reply
