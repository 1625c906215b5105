"""A simulated OpenAI-compatible provider on loopback, for the load bench and the fault harness.

It answers ``POST /t/<tag>/v1/chat/completions`` after a configurable latency, scripted like
the 12-call scenario: a request that offers the ``group__ask`` tool (the coordinator) gets a
``group__ask`` tool call; a request that carries the synthesis instruction gets the final
text; anything else (a member) gets text. It can also time out, reset the connection, answer
429 or 500, in random mixes. ``<tag>`` is the first path segment after ``/t/``: each group's
model accounts put their own tag in ``base_url``, so requests are counted per group.

It counts every request it received (per tag) and keeps a gauge of requests in flight (now,
max, time-weighted mean). Control, JSON over HTTP on the same port:

    GET  /_fake/stats                       counters and the gauge
    POST /_fake/config {"default": {...}, "tags": {"<tag>": {...}}}   (merged)
    POST /_fake/reset                       zero the counters and the gauge

Options: latency, jitter (seconds); p_timeout (hold for ``hang`` seconds, longer than the
client's timeout), p_reset (RST after reading the request), p_429 (with retry_after_ms),
p_500; member (the handle the coordinator asks); member_tool (a tool a member calls first)
and member_tool_args (its arguments), or member_tool_id_arg (its one argument, an integer no
other call was given: each call a distinct action); asks (false: the coordinator answers at
once, a one-call request); reply_chars (a member's answer is that many characters, streamed
in 64 KB events when the call asks for a stream: a server that answers far more than was
asked).

``GET /_fake/slow?seconds=S`` answers after S seconds: a slow page for a tool to fetch.

Run alone: ``python bench/fake_provider.py --port 0 --latency 1`` prints its URL on the first
line of stdout. In-process: ``FakeProvider(latency=...).start()``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fake_replies import scripted_reply

DEFAULTS: dict[str, Any] = {
    "latency": 1.0,
    "jitter": 0.0,
    "p_timeout": 0.0,
    "hang": 30.0,
    "p_reset": 0.0,
    "p_429": 0.0,
    "retry_after_ms": 50,
    "p_500": 0.0,
    "member": "ledger",
    "member_tool": "",
    "member_tool_args": None,
    "member_tool_id_arg": "",
    "asks": True,
    "reply_chars": 0,
}


class FakeProvider:
    """The server; ``start()`` runs it on its own thread and event loop."""

    def __init__(
        self, *, host: str = "127.0.0.1", port: int = 0, seed: int | None = None, **options: Any
    ) -> None:
        self.host, self.port = host, port
        self.default = {**DEFAULTS, **options}
        self.tags: dict[str, dict[str, Any]] = {}
        self.random = random.Random(seed)
        self.connections = 0  # client connections open now (not reset: they are live state)
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self.reset()

    # --- counters -------------------------------------------------------------------------

    def reset(self) -> None:
        self.received = 0
        self.per_tag: dict[str, int] = {}
        self.outcomes: dict[str, int] = {}
        self.open: dict[int, tuple[str, int, float]] = {}  # id -> (tag, client port, since)
        self.max_in_flight = 0
        self._area = 0.0
        self._since = self._last = time.monotonic()

    def _gauge(self, delta: int) -> None:
        now = time.monotonic()
        self._area += len(self.open) * (now - self._last)
        self._last = now
        if delta > 0:
            self.max_in_flight = max(self.max_in_flight, len(self.open) + delta)

    def stats(self) -> dict[str, Any]:
        self._gauge(0)
        elapsed = max(1e-9, self._last - self._since)
        in_flight: dict[str, list[int]] = {}
        for tag, port, _ in self.open.values():
            in_flight.setdefault(tag, []).append(port)
        return {
            "received": self.received,
            "per_tag": dict(self.per_tag),
            "outcomes": dict(self.outcomes),
            "in_flight": len(self.open),
            "max_in_flight": self.max_in_flight,
            "mean_in_flight": self._area / elapsed,
            "window_seconds": elapsed,
            "in_flight_by_tag": in_flight,
            "open_connections": self.connections,
        }

    def options_for(self, tag: str) -> dict[str, Any]:
        return {**self.default, **self.tags.get(tag, {})}

    # --- lifecycle ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> FakeProvider:
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self.serve()), daemon=True, name="fake-provider"
        )
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake provider did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        if self._thread:
            self._thread.join(5)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()

    async def serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._server = await asyncio.start_server(
            self._connection, self.host, self.port, backlog=1024, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            async with self._server:
                await self._server.serve_forever()
        except asyncio.CancelledError:
            pass

    # --- HTTP -----------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer_port = (writer.get_extra_info("peername") or ("", 0))[1]
        self.connections += 1
        try:
            while True:
                line = await reader.readline()
                if not line.strip():
                    return
                method, path, _ = line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while True:
                    raw = await reader.readline()
                    if raw in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = raw.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
                body = await reader.readexactly(length) if length else b""
                if path.startswith("/_fake/slow"):
                    seconds = float(path.partition("seconds=")[2] or 1)
                    await asyncio.sleep(min(seconds, 600))
                    await _write(writer, 200, {"slow": seconds})
                elif path.startswith("/_fake/"):
                    status, payload = self._control(method, path, body)
                    await _write(writer, status, payload)
                elif not await self._complete(path, body, peer_port, writer):
                    return
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError, asyncio.CancelledError):
            return
        finally:
            self.connections -= 1
            if not writer.is_closing():
                writer.close()

    def _control(self, method: str, path: str, body: bytes) -> tuple[int, dict]:
        if path == "/_fake/stats":
            return 200, self.stats()
        if path == "/_fake/reset" and method == "POST":
            self.reset()
            return 200, {"ok": True}
        if path == "/_fake/config" and method == "POST":
            change = json.loads(body or b"{}")
            self.default.update(change.get("default", {}))
            for tag, opts in change.get("tags", {}).items():
                self.tags.setdefault(tag, {}).update(opts)
            return 200, {"ok": True}
        return 404, {"error": "unknown control path"}

    async def _complete(
        self, path: str, body: bytes, peer_port: int, writer: asyncio.StreamWriter
    ) -> bool:
        """Serve one chat completion; False when the connection must end (reset, timeout)."""
        parts = path.split("/")
        tag = parts[2] if len(parts) > 2 and parts[1] == "t" else ""
        opts = self.options_for(tag)
        key = id(writer) ^ time.monotonic_ns()
        self.received += 1
        self.per_tag[tag] = self.per_tag.get(tag, 0) + 1
        self._gauge(+1)
        self.open[key] = (tag, peer_port, time.monotonic())
        try:
            roll = self.random.random()
            edges = [
                ("429", opts["p_429"]),
                ("reset", opts["p_reset"]),
                ("timeout", opts["p_timeout"]),
                ("500", opts["p_500"]),
            ]
            outcome, acc = "ok", 0.0
            for name, p in edges:
                acc += float(p)
                if roll < acc:
                    outcome = name
                    break
            if outcome == "429":
                self._count("429")
                await _write(
                    writer,
                    429,
                    {"error": {"message": "rate limited", "type": "rate_limit"}},
                    {"retry-after-ms": str(opts["retry_after_ms"])},
                )
                return True
            delay = max(
                0.0, float(opts["latency"]) + float(opts["jitter"]) * self.random.uniform(-1, 1)
            )
            if outcome == "reset":
                await asyncio.sleep(delay / 2)
                self._count("reset")
                _reset(writer)
                return False
            if outcome == "timeout":
                self._count("timeout")
                await asyncio.sleep(float(opts["hang"]))
                return False
            await asyncio.sleep(delay)
            if outcome == "500":
                self._count("500")
                await _write(
                    writer, 500, {"error": {"message": "overloaded", "type": "server_error"}}
                )
                return True
            request = json.loads(body or b"{}")
            reply, kind = scripted_reply(
                request,
                opts["member"],
                member_tool=opts["member_tool"],
                member_tool_args=opts["member_tool_args"],
                member_tool_id_arg=opts["member_tool_id_arg"],
                asks=bool(opts["asks"]),
                reply_chars=int(opts["reply_chars"]),
            )
            self._count(kind)
            if kind == "text" and opts["reply_chars"] and request.get("stream"):
                await _stream(writer, reply)
                return False
            await _write(writer, 200, reply)
            return True
        finally:
            self._gauge(-1)
            self.open.pop(key, None)

    def _count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1


async def _write(
    writer: asyncio.StreamWriter, status: int, payload: dict, headers: dict[str, str] | None = None
) -> None:
    data = json.dumps(payload).encode()
    head = [
        f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}",
        "Content-Type: application/json",
        f"Content-Length: {len(data)}",
    ]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
    await writer.drain()


async def _stream(writer: asyncio.StreamWriter, reply: dict[str, Any]) -> None:
    """``reply``'s text as a chat-completions event stream, 64 KB a event; the connection
    closes after ``[DONE]`` (or whenever the client stops reading)."""
    text = reply["choices"][0]["message"]["content"]
    head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    writer.write(head.encode("latin-1"))

    def event(payload: dict[str, Any] | str) -> bytes:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        return f"data: {data}\n\n".encode()

    def delta(piece: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": piece, "finish_reason": finish}]}

    writer.write(event(delta({"role": "assistant", "content": ""})))
    for start in range(0, len(text), 65536):
        writer.write(event(delta({"content": text[start : start + 65536]})))
        await writer.drain()
    writer.write(event(delta({}, "stop")))
    writer.write(event({"choices": [], "usage": reply["usage"]}))
    writer.write(event("[DONE]"))
    await writer.drain()


def _reset(writer: asyncio.StreamWriter) -> None:
    # SO_LINGER 0 makes the close an RST: the client sees a reset after it sent the request.
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FakeProviderClient:
    """Control of a running fake provider, in this process or another."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(timeout=10)

    def base_url(self, tag: str) -> str:
        return f"{self.url}/t/{tag}/v1"

    def stats(self) -> dict[str, Any]:
        return self._http.get(f"{self.url}/_fake/stats").json()

    def configure(
        self, default: dict[str, Any] | None = None, tags: dict[str, dict[str, Any]] | None = None
    ) -> None:
        self._http.post(
            f"{self.url}/_fake/config", json={"default": default or {}, "tags": tags or {}}
        )

    def reset(self) -> None:
        self._http.post(f"{self.url}/_fake/reset")

    def close(self) -> None:
        self._http.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    provider = FakeProvider(host=args.host, port=args.port, latency=args.latency, seed=args.seed)

    async def run() -> None:
        task = asyncio.create_task(provider.serve())
        while not provider._ready.is_set():
            await asyncio.sleep(0.01)
        print(provider.url, flush=True)
        await task

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
