"""Compressed bombs from servers an owner chooses: a few tens of kilobytes of gzip that unpack
to tens of megabytes, sent though garden asks for no encoding, as an MCP server's answer, a
model provider's reply, a webhook receiver's answer, an ``http.fetch`` page, and to every read
path of an egress client. Each is refused by name (or, where the body is never read, never
unpacked), and the memory the reading took is measured (``tracemalloc``'s peak) to stay far
below what the bomb unpacks to.

Every server is real and on 127.0.0.1: the SDK's FastMCP over Streamable HTTP behind an ASGI
layer that answers one method with the bomb, and the scripted HTTP server of the provider
tests for the rest.
"""

from __future__ import annotations

import functools
import json
import tracemalloc
import zlib

import anyio
import pytest

from garden import egress, mcp_client
from garden.providers.types import (
    ChatMessage,
    ChatRequest,
    MalformedReply,
    ReplyTooLarge,
    TextBlock,
)
from garden.tools import ToolContext
from garden.tools.web import http_fetch
from groups.models import WebhookDelivery
from groups.services.webhook_sending import webhook_delivery_attempt
from groups.services.webhooks import webhook_endpoint_create
from tests.garden.providers import conftest as providers
from tests.garden.providers.conftest import http_adapter
from tests.mcp_server import McpTestServer, serving

UNPACKED = 50_000_000  # what every bomb unpacks to
BOUND = 8_000_000  # the most memory reading one may take (its answers are capped far lower)
CTX = ToolContext(owner_id=1, agent_id=1, conversation_id=1)
server = providers.server  # the scripted HTTP server on 127.0.0.1, a fixture


def gzip_layers(prefix: bytes, suffix: bytes, layers: int) -> bytes:
    """``prefix`` + UNPACKED spaces + ``suffix``, gzipped ``layers`` times, built a megabyte at
    a time (the unpacked body is never held here either)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    packed = [packer.compress(prefix)]
    spaces = b" " * 1_000_000
    for _ in range(UNPACKED // len(spaces)):
        packed.append(packer.compress(spaces))
    packed.append(packer.compress(suffix) + packer.flush())
    body = b"".join(packed)
    for _ in range(layers - 1):
        body = zlib.compress(body, 9, wbits=16 + zlib.MAX_WBITS)
    return body


@functools.cache
def bomb(layers: int = 1) -> bytes:
    """A JSON object padded to UNPACKED bytes: valid, so only its size can refuse it."""
    return gzip_layers(b'{"pad": "', b'"}', layers)


def encoding(layers: int) -> str:
    return ", ".join(["gzip"] * layers)


@pytest.fixture
def loopback(settings):
    """The operator allows 127.0.0.1 for every purpose (GARDEN_EGRESS_ALLOW, and MCP's own)."""
    settings.GARDEN_EGRESS_ALLOW = ["127.0.0.1"]
    settings.GARDEN_EGRESS_ALLOW_MCP = ["127.0.0.1"]
    settings.GARDEN_EGRESS_ALLOW_WEBHOOK = ["127.0.0.1"]


class Peak:
    """The peak of Python memory allocated inside the block, above what it started with."""

    def __enter__(self) -> Peak:
        tracemalloc.start()
        tracemalloc.reset_peak()
        self._start = tracemalloc.get_traced_memory()[0]
        return self

    def __exit__(self, *exc: object) -> None:
        self.bytes = tracemalloc.get_traced_memory()[1] - self._start
        tracemalloc.stop()


# --- MCP --------------------------------------------------------------------------------


def packed_mcp(inner, *, method: str, layers: int):
    """``inner`` (an MCP server's ASGI app), except that the POST of JSON-RPC ``method`` is
    answered with a gzip bomb: a JSON-RPC result padded to UNPACKED bytes, packed ``layers``
    times, ``Content-Encoding`` saying so."""

    async def app(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            await inner(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        request = json.loads(body) if body else None
        if isinstance(request, dict) and request.get("method") == method:
            result = b'{"tools": []}' if method == "tools/list" else b'{"content": []}'
            prefix = b'{"jsonrpc": "2.0", "id": %s, "result": %s, "pad": "' % (
                json.dumps(request["id"]).encode(),
                result,
            )
            payload = await anyio.to_thread.run_sync(gzip_layers, prefix, b'"}', layers)
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-encoding", encoding(layers).encode()),
                        (b"content-length", str(len(payload)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": payload})
            return
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await inner(scope, replay, send)

    return app


@pytest.mark.parametrize(
    ("method", "layers", "code"),
    [
        ("tools/list", 1, "MCP_RESULT_TOO_LARGE"),
        ("tools/call", 1, "MCP_RESULT_TOO_LARGE"),
        ("tools/list", 2, "RESPONSE_ENCODING_REFUSED"),
        ("tools/call", 2, "RESPONSE_ENCODING_REFUSED"),
    ],
)
def test_an_mcp_answer_packed_as_a_bomb_is_refused_by_name_in_bounded_memory(
    loopback, method, layers, code
):
    mcp = McpTestServer()
    app = packed_mcp(mcp.app.streamable_http_app(), method=method, layers=layers)
    with serving(app) as url:
        endpoint = mcp_client.Endpoint(url=url)
        with Peak() as peak, pytest.raises(mcp_client.McpFailure) as failed:
            if method == "tools/list":
                mcp_client.list_tools(endpoint, owner_id=1, timeout=20, max_bytes=1_000_000)
            else:
                mcp_client.call_tool(
                    endpoint,
                    owner_id=1,
                    timeout=20,
                    max_bytes=1_000_000,
                    name="lookup",
                    arguments={"query": "q"},
                )
    assert failed.value.code == code, failed.value
    # The server made its bomb inside the block too, a megabyte at a time.
    assert peak.bytes < BOUND, f"{peak.bytes:,} bytes at the peak"


def test_a_memory_error_in_an_mcp_exchange_is_a_named_failure():
    # The last line behind the transport's bound: never an unnamed 500.
    failure = mcp_client._named(ExceptionGroup("task group", [MemoryError()]))
    assert failure.code == "MCP_RESULT_TOO_LARGE"


# --- a model provider ------------------------------------------------------------------

HELLO = ChatRequest(
    system="You are terse.",
    messages=(ChatMessage("user", (TextBlock("hi"),)),),
    max_tokens=64,
)


@pytest.mark.parametrize(
    ("layers", "error", "code"),
    [(1, ReplyTooLarge, "REPLY_TOO_LARGE"), (2, MalformedReply, "PROVIDER_MALFORMED_REPLY")],
)
def test_a_providers_reply_packed_as_a_bomb_is_refused_by_name_in_bounded_memory(
    loopback_providers, server, layers, error, code
):
    server.reply(200, bomb(layers), headers={"Content-Encoding": encoding(layers)})
    provider = http_adapter("openai", server.url, api_key="sk-test", timeout=10)
    with Peak() as peak, pytest.raises(error) as refused:
        provider.complete(HELLO)
    assert refused.value.code == code, refused.value
    assert peak.bytes < BOUND, f"{peak.bytes:,} bytes at the peak"


# --- a webhook receiver ----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("layers", [1, 2])
def test_a_webhook_receivers_packed_answer_is_never_unpacked(loopback, server, owner, layers):
    # A delivery reads the status alone: the receiver's bomb is neither unpacked nor refused.
    from django.utils import timezone

    server.reply(200, bomb(layers), headers={"Content-Encoding": encoding(layers)})
    endpoint = webhook_endpoint_create(
        owner=owner, url=f"{server.url}/hook", events=["request.completed"]
    ).endpoint
    delivery = WebhookDelivery.objects.create(
        endpoint=endpoint,
        event_id="msg_bomb",
        event_type="request.completed",
        payload={"type": "request.completed", "timestamp": "t", "data": {}},
        next_attempt_at=timezone.now(),
    )
    with Peak() as peak:
        assert webhook_delivery_attempt(delivery_id=delivery.pk) == "delivered"
    delivery.refresh_from_db()
    assert delivery.state == "delivered" and delivery.last_status == 200
    assert peak.bytes < BOUND, f"{peak.bytes:,} bytes at the peak"


# --- http.fetch ------------------------------------------------------------------------


def test_an_http_fetch_page_packed_as_a_bomb_is_clipped_or_refused_in_bounded_memory(
    loopback, server, settings
):
    settings.GARDEN_TOOL_HTTP_MAX_BYTES = 10_000
    server.reply(200, bomb(1), headers={"Content-Encoding": "gzip"})
    server.reply(200, bomb(2), headers={"Content-Encoding": "gzip, gzip"})
    server.reply(200, b"x", headers={"Content-Encoding": "br"})
    with Peak() as peak:
        one = http_fetch(CTX, {"url": f"{server.url}/one"})
        two = http_fetch(CTX, {"url": f"{server.url}/two"})
        other = http_fetch(CTX, {"url": f"{server.url}/br"})
    assert "[clipped at 10,000 bytes]" in one.content
    assert two.is_error and two.code == "RESPONSE_ENCODING_REFUSED", two.content
    assert other.code == "RESPONSE_ENCODING_REFUSED"
    assert peak.bytes < BOUND, f"{peak.bytes:,} bytes at the peak"


# --- every read path of an egress client -------------------------------------------------


@pytest.mark.parametrize("purpose", ["provider", "tool", "telegram", "webhook"])
@pytest.mark.parametrize("read", ["read", "json", "iter_bytes", "iter_text"])
def test_no_read_path_of_an_egress_client_unpacks_past_the_ceiling(
    loopback, server, settings, purpose, read
):
    # httpx's own reads (``response.read()``, ``.json()``, ``iter_bytes()``) unpack whatever
    # the header says; an egress client's transport unpacked it first, bounded.
    settings.GARDEN_EGRESS_ALLOW_PROVIDERS = ["127.0.0.1"]
    settings.GARDEN_EGRESS_ALLOW_TELEGRAM = ["127.0.0.1"]
    settings.GARDEN_EGRESS_MAX_DECODED_BYTES = 1_000_000
    server.reply(200, bomb(1), headers={"Content-Encoding": "gzip"})
    server.reply(200, bomb(2), headers={"Content-Encoding": "gzip, gzip"})
    with egress.build_client(purpose) as client, Peak() as peak:
        for refusal in (egress.DecodedTooLarge, egress.EncodingRefused):
            with pytest.raises(refusal), egress.deadline(10):
                if read in ("read", "json"):
                    getattr(client.get(server.url), read)()
                else:
                    with client.stream("GET", server.url) as response:
                        for _ in getattr(response, read)():
                            pass
    assert peak.bytes < BOUND, f"{peak.bytes:,} bytes at the peak"


def test_an_async_egress_client_counts_what_it_unpacks_against_its_budget(loopback, server):
    server.reply(200, bomb(1), headers={"Content-Encoding": "gzip"})
    budget = egress.ReadBudget(1_000_000)

    async def fetch() -> None:
        async with egress.build_async_client("mcp", budget=budget) as client:
            await client.get(server.url)

    with Peak() as peak, pytest.raises(egress.BodyTooLarge), egress.deadline(10):
        anyio.run(fetch)
    assert budget.exceeded
    assert peak.bytes < BOUND, f"{peak.bytes:,} bytes at the peak"
