"""Agents of a group that answer from a real local HTTP server, so a test reads exactly what
each model call was sent (``server.requests``), the way a provider would receive it."""

from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from garden import events
from garden.models import Agent
from garden.services.accounts import model_account_create
from tests.support.driving import drive


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


# --- real files, made here ------------------------------------------------------------------


def png_bytes(width: int = 2, height: int = 2, rgb: tuple[int, int, int] = (200, 80, 40)) -> bytes:
    """A real PNG (8-bit RGB, one colour) that any decoder opens."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + bytes(rgb) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


def pdf_bytes(text: str = "Rent 1400") -> bytes:
    """A real one-page PDF showing ``text``, with a correct cross-reference table."""
    stream = f"BT /F1 12 Tf 20 50 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 100] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


CSV_BYTES = b"month,rent\nJanuary,1400\nFebruary,1400\n"


def anthropic_reply(text: str) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


# --- the room's channel, as its websocket receives it --------------------------------------


def listen(group_id: int) -> tuple[Any, str]:
    """A channel joined to the group's channel group, as the room's consumer joins it."""
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_channel(group_id), channel)
    return layer, channel


def next_events(layer: Any, channel: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    """The next message on ``channel``: its events (a batch's, in order)."""

    async def receive() -> dict[str, Any]:
        return await asyncio.wait_for(layer.receive(channel), timeout)

    event = async_to_sync(receive)()["event"]
    return event["events"] if event["type"] == "batch" else [event]


def one_to_one(owner, agent: Agent, text: str = "hello"):
    """``text`` sent to ``agent`` in a new 1:1 conversation: its request (not started)."""
    from garden.models import Conversation
    from groups.services.requests import conversation_request_create

    conversation = Conversation.objects.create(owner=owner, agent=agent)
    return conversation_request_create(owner=owner, conversation=conversation, text=text)


def answer_of(request):
    """The last turn of ``request`` that is not an activity line: the agent's answer, or the
    notice saying why it did not come."""
    from garden.models import Message

    return (
        Message.objects.filter(request=request)
        .exclude(kind=Message.Kind.ACTIVITY)
        .order_by("-seq")
        .first()
    )


def answered(owner, agent: Agent, text: str = "hello"):
    """``text`` sent to ``agent`` 1:1 and stepped in this thread to its end: the answer."""
    request = one_to_one(owner, agent, text)
    drive(request)
    return answer_of(request)


def answered_by(owner, account, text: str = "hello"):
    """``text`` sent 1:1 to the owner's Concierge answering from ``account``: the answer."""
    agent = Agent.objects.get(owner=owner, handle="concierge")
    agent.model_account = account
    agent.save(update_fields=["model_account"])
    return answered(owner, agent, text)


WRITE = {"name": "file.write", "arguments": {"title": "Plan", "content": "Save 800."}}


def writer(owner, handle: str = "ledger") -> Agent:
    """An agent on an offline script that, asked for a plan, writes one (``file.write``, which
    waits for its owner's approval) and then says "Written." (or "Not written." when refused)."""
    from garden.services.agents import agent_create
    from tests.groups.conftest import scripted

    return agent_create(
        owner=owner,
        handle=handle,
        name=handle.title(),
        model_account=scripted(
            owner,
            handle,
            [
                {"after_tool_error": True, "reply": "Not written."},
                {"after_tool_result": True, "reply": "Written."},
                {"when": "plan", "reply": {"text": "Writing it.", "tool_calls": [WRITE]}},
            ],
        ),
        enabled_tools=["file.write"],
        approval_tools=["file.write"],
    )
