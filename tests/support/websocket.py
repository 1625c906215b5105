"""The smallest websocket client a test needs against a real server (RFC 6455): the opening
handshake with the session's cookie and an Origin, then text frames read as JSON. The server
(daphne) is the thing under test; this only speaks the protocol's client side."""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
from typing import Any


class WebSocketRefused(Exception):
    """The handshake was not answered 101."""


class WebSocket:
    def __init__(self, port: int, path: str, *, cookie: str, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        origin = f"http://127.0.0.1:{port}"
        self.sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                f"Sec-WebSocket-Version: 13\r\nOrigin: {origin}\r\nCookie: {cookie}\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise WebSocketRefused(head.decode(errors="replace") or "connection closed")
            head += chunk
        status, _, self._buffer = head.partition(b"\r\n\r\n")
        if b" 101 " not in status.split(b"\r\n", 1)[0]:
            self.sock.close()
            raise WebSocketRefused(status.decode(errors="replace"))

    def _read(self, n: int) -> bytes:
        while len(self._buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the websocket")
            self._buffer += chunk
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def receive(self) -> Any:
        """The next text frame, as JSON (a close frame raises ConnectionError)."""
        while True:
            first, second = self._read(2)
            opcode, length = first & 0x0F, second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", self._read(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", self._read(8))
            payload = self._read(length)
            if opcode == 0x8:
                raise ConnectionError(f"the server closed the websocket: {payload[:2].hex()}")
            if opcode == 0x1:
                return json.loads(payload)

    def close(self) -> None:
        try:
            mask = os.urandom(4)
            self.sock.sendall(bytes([0x88, 0x80]) + mask)
        except OSError:
            pass
        self.sock.close()
