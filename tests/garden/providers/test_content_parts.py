"""Pictures and PDFs as content parts, against a real local HTTP server: each adapter sends
the kinds it carries after their reference line, and the line alone for anything else — an
account with ``"images": false``, a reference without bytes, an assistant turn."""

from __future__ import annotations

import base64

import pytest

from garden.providers import get_provider, inline_media_types
from garden.providers.types import AccountConfig, ArtifactRef, ChatMessage, ChatRequest, TextBlock
from tests.groups.helpers import anthropic_reply, pdf_bytes, png_bytes
from tests.support.providers import openai_reply

PNG = png_bytes()
PDF = pdf_bytes()
PICTURE = ArtifactRef("5", "image", "chart.png", media_type="image/png", data=PNG)
LEASE = ArtifactRef("6", "document", "lease.pdf", media_type="application/pdf", data=PDF)
NO_BYTES = ArtifactRef("7", "image", "old.png")


def request_with(*blocks) -> ChatRequest:
    return ChatRequest(
        system="s",
        messages=(ChatMessage("user", (TextBlock("Look:"), *blocks)),),
        max_tokens=16,
    )


def sent(server, provider: str, options: dict | None = None, *blocks) -> dict:
    server.reply(200, openai_reply("ok") if provider == "openai" else anthropic_reply("ok"))
    base = f"{server.url}/v1" if provider == "openai" else server.url
    config = AccountConfig(provider=provider, model="m", base_url=base, options=options or {})
    get_provider(config).complete(request_with(*blocks))
    return server.last.body


def encoded(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_openai_sends_a_picture_as_an_image_url_part(server):
    body = sent(server, "openai", None, PICTURE, LEASE, NO_BYTES)
    assert body["messages"][-1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Look:\n[artifact 5 (image): chart.png]"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded(PNG)}"}},
            {
                "type": "text",
                "text": "[artifact 6 (document): lease.pdf]\n[artifact 7 (image): old.png]",
            },
        ],
    }


def test_anthropic_sends_image_and_document_blocks(server):
    body = sent(server, "anthropic", None, PICTURE, LEASE, NO_BYTES)
    source = {"type": "base64", "media_type": "image/png", "data": encoded(PNG)}
    assert body["messages"][-1]["content"] == [
        {"type": "text", "text": "Look:"},
        {"type": "text", "text": "[artifact 5 (image): chart.png]"},
        {"type": "image", "source": source},
        {"type": "text", "text": "[artifact 6 (document): lease.pdf]"},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": encoded(PDF)},
            "title": "lease.pdf",
        },
        {"type": "text", "text": "[artifact 7 (image): old.png]"},
    ]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_account_that_reads_text_only_gets_the_lines(server, provider):
    body = sent(server, provider, {"images": False}, PICTURE, LEASE)
    assert "base64" not in str(body)
    assert "[artifact 5 (image): chart.png]" in str(body)
    assert "[artifact 6 (document): lease.pdf]" in str(body)


def test_an_assistant_turn_never_carries_bytes(server):
    server.reply(200, openai_reply("ok"))
    config = AccountConfig(provider="openai", model="m", base_url=f"{server.url}/v1")
    get_provider(config).complete(
        ChatRequest(
            system="s",
            messages=(
                ChatMessage("user", (TextBlock("hi"),)),
                ChatMessage("assistant", (PICTURE,)),
                ChatMessage("user", (TextBlock("and?"),)),
            ),
        )
    )
    assert "base64" not in str(server.last.body)


def test_what_each_account_carries():
    assert inline_media_types("openai", {}) == {
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
    }
    assert "application/pdf" in inline_media_types("anthropic", None)
    assert inline_media_types("anthropic", {"images": False}) == frozenset()
    assert inline_media_types("scripted", {}) == frozenset()


def test_the_bytes_are_neither_compared_nor_printed():
    same = ArtifactRef("5", "image", "chart.png", media_type="image/png", data=b"other")
    assert same == PICTURE and hash(same) == hash(PICTURE)
    assert "data" not in repr(PICTURE)
