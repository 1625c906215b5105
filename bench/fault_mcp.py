"""The MCP server of the fault harness: the SDK's FastMCP over Streamable HTTP, served by
uvicorn on a thread of the harness process, with one destructive tool that counts the calls it
received per record, so the harness can check that each approved call reached it at most once.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter

import uvicorn
from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

SERVER = "tracker"
TOOL = "delete_record"
# What an agent enables; annotated destructive, so each call waits for approval by default.
AGENT_TOOL = f"mcp.{SERVER}.{TOOL}"
ID_ARGUMENT = "record_id"


class Tracker:
    """``start()`` serves it on 127.0.0.1 (``url``); ``counts()`` is how many calls it
    received per record id."""

    def __init__(self) -> None:
        self.url = ""
        self._runs: Counter[int] = Counter()
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        app = FastMCP("garden-faults", stateless_http=True, json_response=False)

        @app.tool(
            name=TOOL,
            description="Delete a record for good.",
            annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True),
        )
        def delete_record(record_id: int) -> str:
            with self._lock:
                self._runs[record_id] += 1
            return f"deleted record {record_id}"

        self._app = app.streamable_http_app()

    def counts(self) -> dict[int, int]:
        with self._lock:
            return dict(self._runs)

    def start(self) -> Tracker:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self._server = uvicorn.Server(
            uvicorn.Config(
                self._app,
                host="127.0.0.1",
                port=port,
                log_level="warning",
                lifespan="on",
                timeout_graceful_shutdown=1,
            )
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True, name="mcp-tracker")
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the harness's MCP server did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
