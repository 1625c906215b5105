"""The replies bench/fake_provider.py gives, scripted like the 12-call scenario: the
coordinator asks forever (or concludes at once), members answer (a tool first, when asked to),
and the reserved answer concludes. Plain data in, an OpenAI chat completion out."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from typing import Any

# The end of the reserved answer's instruction, a group's and one agent's alike
# (groups/domain/projection.py SYNTHESIS_INSTRUCTION, SOLO_SYNTHESIS_INSTRUCTION).
SYNTHESIS_MARK = "Start no new work: no tools are available for this answer."


# The numbers of member_tool_id_arg, unique within this process.
_action_ids = itertools.count(1)


def scripted_reply(
    request: dict[str, Any],
    member: str,
    *,
    member_tool: str = "",
    member_tool_args: dict[str, Any] | None = None,
    member_tool_id_arg: str = "",
    asks: bool = True,
    reply_chars: int = 0,
) -> tuple[dict[str, Any], str]:
    """The 12-call scenario: the coordinator asks forever, members answer, synthesis concludes.
    With ``member_tool`` (a tool's wire name, such as ``file__write``), a member offered that
    tool first calls it (a document with a title of its own; with ``member_tool_id_arg``, that
    argument alone, a number never given before) and answers once it has the result."""
    tools = {t.get("function", {}).get("name") for t in request.get("tools") or []}
    messages = request.get("messages") or []
    texts = [m.get("content") for m in messages]
    if any(isinstance(t, str) and SYNTHESIS_MARK in t for t in texts):
        message, finish, kind = (
            {"role": "assistant", "content": "Final: the figures above."},
            "stop",
            "synthesis",
        )
    elif "group__ask" in tools and not asks:
        message, finish, kind = {"role": "assistant", "content": "Done."}, "stop", "concluded"
    elif "group__ask" in tools:
        call = {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {
                "name": "group__ask",
                "arguments": json.dumps({"member": member, "request": "One more figure."}),
            },
        }
        message, finish, kind = (
            {"role": "assistant", "content": None, "tool_calls": [call]},
            "tool_calls",
            "ask",
        )
    elif member_tool and member_tool in tools and (messages[-1:] or [{}])[0].get("role") != "tool":
        if member_tool_id_arg:
            arguments = {member_tool_id_arg: next(_action_ids)}
        else:
            title = f"note {uuid.uuid4().hex[:12]}"
            arguments = member_tool_args or {"title": title, "content": "A figure: 42."}
        call = {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": member_tool, "arguments": json.dumps(arguments)},
        }
        message, finish, kind = (
            {"role": "assistant", "content": None, "tool_calls": [call]},
            "tool_calls",
            "member_tool",
        )
    else:
        # Every working call carries its speaker's tools (group.ask or group.request_help);
        # one without any is counted apart: its agent was called without them.
        text = "A figure: 42."
        message = {"role": "assistant", "content": text.ljust(reply_chars, "x")}
        finish = "stop"
        kind = "text" if tools else "untooled"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }, kind
