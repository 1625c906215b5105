"""http.fetch: an agent fetches a URL over HTTP(S) (a side effect: it reaches the network)."""

from __future__ import annotations

from typing import Any

import httpx
from django.conf import settings

from garden.providers.types import ToolSpec
from garden.tools import Tool, ToolContext, ToolOutcome, register

MAX_BYTES = 100_000

HTTP_FETCH = register(Tool(
    spec=ToolSpec(
        name="http.fetch",
        description="Fetch a web page or API over HTTP(S) with GET and return its text.",
        parameters={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": False,
            "required": ["url"],
            "properties": {"url": {"type": "string", "pattern": "^https?://", "maxLength": 2000}},
        },
    ),
    handler=lambda ctx, args: http_fetch(ctx, args),
))


def http_fetch(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    try:
        with httpx.Client(timeout=settings.GARDEN_TOOL_HTTP_TIMEOUT, follow_redirects=True) as client:
            response = client.get(args["url"])
    except httpx.HTTPError as exc:
        return ToolOutcome(f"FETCH_FAILED: {type(exc).__name__}: {exc}", is_error=True, code="FETCH_FAILED")
    body = response.content[:MAX_BYTES].decode(response.encoding or "utf-8", errors="replace")
    clipped = " [clipped]" if len(response.content) > MAX_BYTES else ""
    return ToolOutcome(f"HTTP {response.status_code}{clipped}\n{body}", is_error=response.status_code >= 400)
