"""A real MCP server for tests: the SDK's FastMCP over Streamable HTTP, served by uvicorn on a
thread on 127.0.0.1, with tools that read, delete, hang, answer 20 MB and draw a picture, and
a log of every call it received (``server.calls``)."""

from __future__ import annotations

import base64
import socket
import threading
import time
from contextlib import contextmanager
from typing import Annotated, Any

import anyio
import uvicorn
from mcp.server.fastmcp import FastMCP, Image
from mcp.types import ImageContent, ToolAnnotations
from pydantic import Field

from tests.groups.helpers import png_bytes


class McpTestServer:
    def __init__(
        self, *, token: str | None = None, stateful: bool = False, stall_delete: bool = False
    ) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.token = token
        self.seen_headers: list[dict[str, str]] = []
        self.stall_delete = stall_delete
        app = FastMCP("garden-test", stateless_http=not stateful, json_response=False)
        self.app = app

        @app.tool(
            name="lookup",
            description="Look a record up by its query.",
            annotations=ToolAnnotations(readOnlyHint=True),
        )
        def lookup(query: str) -> str:
            self.calls.append(("lookup", {"query": query}))
            return f"record for {query}: balance 1400"

        @app.tool(
            name="delete_record",
            description="Delete a record for good.",
            annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True),
        )
        def delete_record(record_id: int) -> str:
            self.calls.append(("delete_record", {"record_id": record_id}))
            return f"deleted record {record_id}"

        @app.tool(name="slow", description="Never answers in time.")
        async def slow() -> str:
            self.calls.append(("slow", {}))
            await anyio.sleep(30)  # timing is the behaviour: a tool slower than any deadline
            return "late"

        @app.tool(name="wait", description="Answers after some seconds.")
        async def wait(seconds: float) -> str:
            self.calls.append(("wait", {"seconds": seconds}))
            await anyio.sleep(seconds)  # timing is the behaviour: a tool that takes this long
            return f"waited {seconds:g} s"

        @app.tool(name="strict", description="Takes a code of a's.")
        def strict(code: Annotated[str, Field(pattern=r"^(a|a)+$")]) -> str:
            self.calls.append(("strict", {"code": code}))
            return "ok"

        @app.tool(name="gallery", description="Answers many pictures, some empty.")
        def gallery(count: int) -> list:
            self.calls.append(("gallery", {"count": count}))
            return [Image(data=png_bytes(), format="png") for _ in range(count)] + [
                ImageContent(type="image", data="", mimeType="image/png"),
                ImageContent(type="image", data=png_data_url(), mimeType="text/html\nx"),
            ]

        @app.tool(name="huge", description="Answers twenty megabytes.")
        def huge() -> str:
            self.calls.append(("huge", {}))
            return "x" * 20_000_000

        @app.tool(name="picture", description="Draws a picture.")
        def picture() -> Image:
            self.calls.append(("picture", {}))
            return Image(data=png_bytes(), format="png")

        @app.tool(name="broken", description="Always fails.")
        def broken() -> str:
            self.calls.append(("broken", {}))
            raise RuntimeError("the tracker is down")

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def asgi(self):
        inner = self.app.streamable_http_app()
        server = self

        async def app(scope, receive, send):
            if scope["type"] == "http" and scope["method"] == "DELETE" and server.stall_delete:
                await anyio.sleep(60)  # timing is the behaviour: a server that stalls
                return
            if scope["type"] == "http":
                headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
                server.seen_headers.append(headers)
                if server.token and headers.get("authorization") != f"Bearer {server.token}":
                    await send({"type": "http.response.start", "status": 401, "headers": []})
                    await send({"type": "http.response.body", "body": b"no"})
                    return
            await inner(scope, receive, send)

        return app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(app, *, path: str = "/mcp"):
    """Serve ASGI ``app`` on 127.0.0.1 until the block ends; yields the URL of ``path``."""
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test MCP server did not start")
        time.sleep(0.02)  # waits FOR the server to start, with a deadline
    try:
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def mcp_server(**kwargs):
    """A running ``McpTestServer``; ``.url`` is its endpoint."""
    test_server = McpTestServer(**kwargs)
    with serving(test_server.asgi()) as url:
        test_server.url = url
        yield test_server


def png_data_url() -> str:
    return base64.b64encode(png_bytes()).decode()
