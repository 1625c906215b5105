"""A real HTTP server on 127.0.0.1 whose answers each test scripts, recording every request.

Adapters are tested against actual sockets so timeouts, resets and refusals are the ones httpx
really raises, not mocks of them.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Respond:
    """Answer with ``status`` and ``body`` (JSON-encoded unless it is already bytes)."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class Reset:
    """Read the request, then abort the connection with a TCP RST (SO_LINGER 0)."""


@dataclass(frozen=True)
class Drip:
    """Answer 200, then send the body one byte every ``interval`` seconds, never finishing
    (until the client leaves or the server stops): a server that would hold a reader forever."""

    interval: float = 0.1


@dataclass(frozen=True)
class Stream:
    """Answer 200 ``text/event-stream`` and send ``events`` (each already SSE text, or a dict
    sent as one ``data:`` line) one at a time, waiting ``interval`` seconds before each; the
    body ends when the connection closes. ``cut`` aborts the connection with a TCP RST after
    the events instead of closing it."""

    events: tuple[Any, ...] = ()
    interval: float = 0.0
    cut: bool = False


Action = Respond | Reset | Drip | Stream


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    peer: tuple[str, int] = ("", 0)  # the client's address: one per TCP connection


class ScriptedServer:
    """Serves queued actions in order, then ``default``; stops on ``close()``.

    ``keep_alive`` answers HTTP/1.1 and keeps each connection open between requests (the
    default, HTTP/1.0, closes it after every answer).
    """

    def __init__(self, *, keep_alive: bool = False, host: str = "127.0.0.1", port: int = 0) -> None:
        self.requests: list[RecordedRequest] = []
        self.sent = 0  # events of streamed answers written so far
        self.streams_ended = 0  # streamed answers whose handler returned (sent all, or cut off)
        self.default: Action = Respond(500, {"error": "no scripted answer"})
        self._script: deque[Action] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = _Server((host, port), _KeepAliveHandler if keep_alive else _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def push(self, *actions: Action) -> None:
        with self._lock:
            self._script.extend(actions)

    def reply(
        self,
        status: int = 200,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Queue one answer; ``body`` is JSON-encoded unless it is bytes."""
        self.push(Respond(status, body, headers or {}, delay))

    def reset(self) -> None:
        """Queue an aborted connection (RST after the request was read)."""
        self.push(Reset())

    def stream(self, *events: Any, interval: float = 0.0, cut: bool = False) -> None:
        """Queue an event stream (see ``Stream``)."""
        self.push(Stream(tuple(events), interval, cut))

    @property
    def last(self) -> RecordedRequest:
        with self._lock:
            return self.requests[-1]

    def next_action(self) -> Action:
        with self._lock:
            return self._script.popleft() if self._script else self.default

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def wait(self, seconds: float) -> None:
        """Sleep, but wake at once when the server stops so a slow answer never outlives it."""
        self._stopping.wait(seconds)

    def close(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


class _Server(ThreadingHTTPServer):
    owner: ScriptedServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that time out and leave make writes fail; that is the scenario, not a bug.
        pass


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        owner.record(
            RecordedRequest(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                peer=self.client_address[:2],
            )
        )
        action = owner.next_action()
        if isinstance(action, Reset):
            self._reset()
            return
        if isinstance(action, Drip):
            self._drip(action.interval)
            return
        if isinstance(action, Stream):
            self._stream(action)
            return
        if action.delay:
            owner.wait(action.delay)
        payload = (
            action.body if isinstance(action.body, bytes) else json.dumps(action.body).encode()
        )
        try:
            self.send_response(action.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in action.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            pass

    def _drip(self, interval: float) -> None:
        owner = self.server.owner
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(10**9))
            self.end_headers()
            while not owner._stopping.is_set():
                self.wfile.write(b"x")
                self.wfile.flush()
                owner.wait(interval)
        except OSError:
            pass

    def _stream(self, action: Stream) -> None:
        try:
            self._send_stream(action)
        finally:
            self.server.owner.streams_ended += 1

    def _send_stream(self, action: Stream) -> None:
        owner = self.server.owner
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
            for event in action.events:
                owner.wait(action.interval)
                if owner._stopping.is_set():
                    return
                text = event if isinstance(event, str) else f"data: {json.dumps(event)}\n\n"
                self.wfile.write(text.encode())
                self.wfile.flush()
                owner.sent += 1
        except OSError:
            return
        self.close_connection = True
        if action.cut:
            self._reset()

    def _reset(self) -> None:
        # SO_LINGER with a zero timeout makes close() send RST instead of FIN. rfile holds a
        # reference to the socket, so it must close too or the descriptor stays open.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.rfile.close()
        self.connection.close()


class _KeepAliveHandler(_Handler):
    protocol_version = "HTTP/1.1"


def unused_port() -> int:
    """A port nothing listens on: bound once by the OS, then released."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
