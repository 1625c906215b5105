"""Talking to an MCP server over Streamable HTTP with the official SDK (``mcp`` 1.x), its HTTP
client built by the egress policy: every connection checked, one deadline for the whole
exchange, every byte read counted against a cap. Each operation is one short session in an
event loop of its own on the calling thread; every failure is an ``McpFailure`` with a code.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import httpx
from mcp import ClientSession, McpError, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from garden import egress

T = TypeVar("T")

# tools/list pages read at most, and tools kept at most, from one server.
MAX_PAGES = 10
MAX_TOOLS = 100


class McpFailure(Exception):
    """An MCP exchange that did not give an answer; ``code`` names why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ListedTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool
    images: tuple[tuple[str, bytes], ...] = ()  # (media type, bytes)
    structured: dict[str, Any] | None = None
    extra: tuple[str, ...] = field(default=())  # what else came, in one line each


@dataclass(frozen=True)
class Endpoint:
    """Where a server is: a remote URL with the headers it needs, or (the operator's alone) a
    local command spoken to over stdio."""

    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    # The egress purpose its connections pass: an owner's server's ("mcp"), or the site's
    # ("mcp_site": the hosts the operator configured are reachable for it alone).
    purpose: egress.Purpose = "mcp"
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None


def list_tools(
    endpoint: Endpoint, *, owner_id: int | None, timeout: float, max_bytes: int
) -> list[ListedTool]:
    """The server's tools (``tools/list``, every page up to MAX_PAGES, at most MAX_TOOLS)."""

    async def op(session: ClientSession) -> list[ListedTool]:
        found: list[ListedTool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await session.list_tools(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            for tool in page.tools:
                found.append(
                    ListedTool(
                        name=tool.name,
                        description=tool.description or tool.title or "",
                        input_schema=tool.inputSchema,
                        annotations=tool.annotations.model_dump(exclude_none=True)
                        if tool.annotations
                        else {},
                    )
                )
            cursor = page.nextCursor
            if not cursor or len(found) >= MAX_TOOLS:
                break
        return found[:MAX_TOOLS]

    return _exchange(endpoint, owner_id, timeout, max_bytes, op)


def call_tool(
    endpoint: Endpoint,
    *,
    owner_id: int | None,
    timeout: float,
    max_bytes: int,
    name: str,
    arguments: dict[str, Any],
) -> ToolResult:
    """One ``tools/call``; the server's own error result (``isError``) is a result, not a
    failure."""

    async def op(session: ClientSession) -> ToolResult:
        result = await session.send_request(
            types.ClientRequest(
                types.CallToolRequest(
                    params=types.CallToolRequestParams(name=name, arguments=arguments)
                )
            ),
            types.CallToolResult,
        )
        return _result(result)

    return _exchange(endpoint, owner_id, timeout, max_bytes, op)


def _result(result: types.CallToolResult) -> ToolResult:
    texts: list[str] = []
    images: list[tuple[str, bytes]] = []
    extra: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ImageContent):
            try:
                images.append((block.mimeType, base64.b64decode(block.data, validate=True)))
            except (binascii.Error, ValueError):
                extra.append(f"[an image ({block.mimeType}) that is not valid base64]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                texts.append(f"[resource {resource.uri}]\n{resource.text}")
            else:
                extra.append(f"[resource {resource.uri} ({resource.mimeType or 'binary'})]")
        elif isinstance(block, types.ResourceLink):
            extra.append(f"[resource link {block.uri}: {block.name}]")
        else:
            extra.append(f"[{getattr(block, 'type', 'content')} content left out]")
    return ToolResult(
        text="\n".join(texts),
        is_error=bool(result.isError),
        images=tuple(images),
        structured=result.structuredContent,
        extra=tuple(extra),
    )


def _exchange(
    endpoint: Endpoint,
    owner_id: int | None,
    timeout: float,
    max_bytes: int,
    op: Callable[[ClientSession], Awaitable[T]],
) -> T:
    if not endpoint.command:
        # Refused before any connection: a literal address or localhost the policy refuses.
        try:
            egress.check_url(endpoint.url, endpoint.purpose)
        except egress.EgressRefused as exc:
            raise McpFailure(exc.code, exc.message) from None
    failures: list[BaseException] = []
    # The answer, once it came: the session's teardown (its DELETE, its GET stream) may fail
    # or run out of time after it, and that says nothing about the call.
    answer: list[T] = []
    budget = egress.ReadBudget(max_bytes)

    async def run() -> None:
        with anyio.CancelScope() as scope:
            budget.on_exceeded = scope.cancel

            async def on_message(message: Any) -> None:
                # The SDK hands transport failures here rather than to the waiting request.
                if isinstance(message, Exception):
                    failures.append(message)
                    scope.cancel()

            async with AsyncExitStack() as stack:
                if endpoint.command:
                    # The operator's own program: trusted, bounded by the deadline alone.
                    params = StdioServerParameters(
                        command=endpoint.command, args=list(endpoint.args), env=endpoint.env
                    )
                    read, write = await stack.enter_async_context(stdio_client(params))
                else:
                    client = await stack.enter_async_context(
                        egress.build_async_client(
                            endpoint.purpose, budget=budget, headers=endpoint.headers
                        )
                    )
                    read, write, _ = await stack.enter_async_context(
                        streamable_http_client(endpoint.url, http_client=client)
                    )
                session = await stack.enter_async_context(
                    ClientSession(read, write, message_handler=on_message)
                )
                await session.initialize()
                answer.append(await op(session))

    async def within() -> None:
        with anyio.move_on_after(timeout):
            try:
                await run()
            except Exception:
                if not answer:
                    raise

    try:
        with egress.deadline(timeout, owner_id=owner_id):
            anyio.run(within)
    except Exception as exc:  # a server's or the transport's failure; never the process's own
        if not answer and not budget.exceeded:
            raise _named(_first(exc)) from None
    if answer:
        return answer[0]
    if budget.exceeded:
        raise McpFailure(
            "MCP_RESULT_TOO_LARGE",
            f"the server sent more than {max_bytes:,} bytes; the answer was not read.",
        )
    if failures:
        raise _named(failures[0])
    raise McpFailure("MCP_TIMEOUT", f"the server did not answer within {timeout:g} s.")


def _first(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio's task groups raise them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _named(exc: BaseException | None) -> McpFailure:
    exc = _first(exc) if exc is not None else None
    if isinstance(exc, McpFailure):
        return exc
    if isinstance(exc, egress.DecodedTooLarge | egress.BodyTooLarge | MemoryError):
        # An answer that unpacked or grew past what this process will hold: named, never a
        # bare 500 (the transport bounds unpacking; MemoryError is the last line).
        return McpFailure(
            "MCP_RESULT_TOO_LARGE", "the server's answer was too large; it was not read."
        )
    if isinstance(exc, egress.EgressRefused):
        return McpFailure(exc.code, exc.message)
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        if status in (401, 403):
            return McpFailure(
                "MCP_AUTH_FAILED", f"the server refused the credentials (HTTP {status})."
            )
        return McpFailure(
            "MCP_NOT_MCP", f"the server answered HTTP {status}; it does not speak MCP at this URL."
        )
    if isinstance(exc, McpError) and exc.error.message == "Session terminated":
        # What the SDK makes of an HTTP 404 to its first request.
        return McpFailure(
            "MCP_NOT_MCP", "the server answered HTTP 404; no MCP endpoint at this URL."
        )
    if isinstance(exc, McpError):
        return McpFailure("MCP_ERROR", f"the server answered with an error: {exc.error.message}")
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return McpFailure("MCP_TIMEOUT", "the server did not answer in time.")
    if isinstance(exc, httpx.ConnectError | OSError):
        return McpFailure("MCP_UNREACHABLE", "the server cannot be reached.")
    if exc is None or isinstance(exc, ValueError | httpx.HTTPError):
        # Unexpected content types and unreadable JSON-RPC land here. The transport's own
        # words are left out: they may quote a header, and headers hold secrets.
        return McpFailure(
            "MCP_NOT_MCP", f"the server does not speak MCP at this URL ({type(exc).__name__})."
        )
    return McpFailure("MCP_FAILED", f"the exchange failed ({type(exc).__name__}).")
