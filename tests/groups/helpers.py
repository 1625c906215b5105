"""Agents of a group that answer from a real local HTTP server, so a test reads exactly what
each model call was sent (``server.requests``), the way a provider would receive it."""

from __future__ import annotations

import json
from typing import Any

from garden.models import Agent
from garden.services.accounts import model_account_create


def openai_reply(
    content: str | None = None, tool_calls: list[tuple[str, str, dict]] | tuple = ()
) -> dict[str, Any]:
    """A chat-completions answer; each tool call is ``(id, dotted name, arguments)``."""
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
    return {
        "choices": [{"message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }


def on_server(owner, agent: Agent, server) -> None:
    """Point ``agent`` at ``server`` through an OpenAI-compatible account."""
    agent.model_account = model_account_create(
        owner=owner,
        name=f"{agent.handle}-http",
        provider="openai",
        model="m",
        base_url=f"{server.url}/v1",
        timeout_seconds=5,
    )
    agent.save(update_fields=["model_account"])


def tool_names(body: dict[str, Any]) -> list[str]:
    """The tool names a chat-completions request offered (wire form, ``.`` as ``__``)."""
    return [t["function"]["name"] for t in body.get("tools", [])]
