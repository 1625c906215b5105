"""Agents of a group that answer from a real local HTTP server, so a test reads exactly what
each model call was sent (``server.requests``), the way a provider would receive it."""

from __future__ import annotations

import json
from typing import Any

from garden.models import Agent
from garden.services.accounts import model_account_create


def openai_reply(
    content: str | None = None,
    tool_calls: list[tuple[str, str, dict]] | tuple = (),
    *,
    usage: tuple[int, int] = (1, 1),
) -> dict[str, Any]:
    """A chat-completions answer; each tool call is ``(id, dotted name, arguments)``;
    ``usage`` is (prompt tokens, completion tokens)."""
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
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
    }


def openai_stream(reply: dict[str, Any], *, pieces: int = 4) -> list[Any]:
    """``reply`` (an ``openai_reply``) as the chunks of a streamed answer: its text in about
    ``pieces`` pieces, each tool call in two, the finish reason, the usage, ``[DONE]``."""
    choice = reply["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    text = message.get("content") or ""
    words = text.split(" ")
    size = max(1, -(-len(words) // pieces))
    parts = [" ".join(words[i : i + size]) for i in range(0, len(words), size)] if text else []
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [
        chunk({"content": part + (" " if i < len(parts) - 1 else "")})
        for i, part in enumerate(parts)
    ]
    for index, call in enumerate(message.get("tool_calls", [])):
        head = {"index": index, "id": call["id"], "type": "function"}
        arguments = call["function"]["arguments"]
        middle = len(arguments) // 2
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            **head,
                            "function": {
                                "name": call["function"]["name"],
                                "arguments": arguments[:middle],
                            },
                        }
                    ]
                }
            )
        )
        chunks.append(
            chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[middle:]}}]})
        )
    chunks.append(chunk({}, choice["finish_reason"]))
    chunks.append({"choices": [], "usage": reply["usage"]})
    chunks.append("data: [DONE]\n\n")
    return chunks


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
