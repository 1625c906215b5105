"""http.fetch: an agent fetches a URL over HTTP(S) (a side effect: it reaches the network).

Every fetch passes the egress policy (garden/egress/): public addresses only unless the
operator allows more, every redirect hop checked, the body read up to a byte cap and the
whole fetch within a total time limit. Each fetch an agent makes leaves a visit on the Canvas
(garden/tools/visits.py); one the egress policy refuses leaves none, since nothing was reached.
"""

from __future__ import annotations

from typing import Any

import httpx
from django.conf import settings

from garden import egress
from garden.providers.types import ToolSpec
from garden.tools import Tool, ToolContext, ToolOutcome, register
from garden.tools.visits import Visit, failed_visit, page_visit, visit_record

MAX_REDIRECTS = 5

HTTP_FETCH = register(
    Tool(
        spec=ToolSpec(
            name="http.fetch",
            description="Fetch a web page or API over HTTP(S) with GET and return its text.",
            parameters={
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "additionalProperties": False,
                "required": ["url"],
                "properties": {
                    "url": {"type": "string", "pattern": "^https?://", "maxLength": 2000}
                },
            },
        ),
        handler=lambda ctx, args: http_fetch_visit(ctx, args),
        meta={"describe": "fetch {url}", "describe_general": "fetch a web page"},
    )
)


def _client() -> httpx.Client:
    return egress.shared("tool", lambda: egress.build_client("tool"))


def _failed(code: str, message: str) -> ToolOutcome:
    return ToolOutcome(f"{code}: {message}", is_error=True, code=code)


def http_fetch_visit(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    """http.fetch as an agent runs it: the fetch, then the visit kept for the Canvas, after
    the fetch and outside it (no transaction is open across the network)."""
    outcome, visit = _fetch(ctx, args["url"])
    if visit is not None:
        visit_record(ctx=ctx, visit=visit)
    return outcome


def http_fetch(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    """The fetch alone, what the agent reads of it; nothing is kept."""
    return _fetch(ctx, args["url"])[0]


def _fetch(ctx: ToolContext, url: str) -> tuple[ToolOutcome, Visit | None]:
    limit = settings.GARDEN_TOOL_HTTP_TIMEOUT
    cap = settings.GARDEN_TOOL_HTTP_MAX_BYTES
    try:
        with egress.deadline(limit, owner_id=ctx.owner_id):
            # Redirects are followed here, hop by hop, so that a redirect's own body is never
            # read (httpx would read and unpack it whole) and every hop is checked again.
            for _hop in range(MAX_REDIRECTS + 1):
                egress.check_url(url, "tool")
                with _client().stream("GET", url, timeout=httpx.Timeout(limit)) as response:
                    if response.is_redirect and response.next_request is not None:
                        url = str(response.next_request.url)
                        continue
                    raw, clipped = egress.read_capped(response, cap)
                    break
            else:
                return _unanswered(url, "FETCH_FAILED", f"more than {MAX_REDIRECTS} redirects.")
    except (egress.EncodingRefused, egress.DecodedTooLarge) as exc:
        # The page answered, in a form garden does not unpack: a visit that says so.
        return _unanswered(url, exc.code, exc.message)
    except egress.EgressRefused as exc:
        return _failed(exc.code, exc.message), None
    except httpx.TimeoutException:
        return _unanswered(url, "FETCH_TIMEOUT", f"the fetch did not finish within {limit:g} s.")
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return _unanswered(url, "FETCH_FAILED", f"{type(exc).__name__}: {exc}")
    body = raw.decode(response.encoding or "utf-8", errors="replace")
    note = f" [clipped at {cap:,} bytes]" if clipped else ""
    outcome = ToolOutcome(
        f"HTTP {response.status_code}{note}\n{body}", is_error=response.status_code >= 400
    )
    visit = page_visit(
        url=url,
        status=response.status_code,
        content_type=response.headers.get("content-type", ""),
        body=body,
    )
    return outcome, visit


def _unanswered(url: str, code: str, message: str) -> tuple[ToolOutcome, Visit]:
    """A fetch that reached out and got no usable answer: the agent's error, and a visit that
    says so."""
    return _failed(code, message), failed_visit(url=url, code=code, message=message)
