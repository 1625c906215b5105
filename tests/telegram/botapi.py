"""A real HTTP server on 127.0.0.1 that speaks enough of the Telegram Bot API for garden
(getMe, sendMessage, editMessageText, answerCallbackQuery, getUpdates, setWebhook,
deleteWebhook), recording every call, so the surface is tested over actual sockets through
the egress policy, with no network."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

BOT_ID = 777000111
BOT_USERNAME = "garden_test_bot"


@dataclass(frozen=True)
class Call:
    """One Bot API call as the server received it."""

    method: str
    token: str
    params: dict[str, Any]


class FakeBotApi:
    """Answers as Telegram would for one bot ``token``; a wrong token gets 401. Updates queued
    with ``queue_update`` are handed out by getUpdates from its ``offset`` on.
    ``fail(method, status, description)`` makes the next call of ``method`` fail."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.calls: list[Call] = []
        self.webhook: dict[str, Any] = {}
        self._updates: list[dict[str, Any]] = []
        self._failures: dict[str, list[tuple[int, str]]] = {}
        self._next_message_id = 100
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.api = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # --- what a test reads and scripts --------------------------------------------------

    def calls_of(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def wait_for(
        self, method: str, where: Callable[[Call], bool] = lambda c: True, timeout: float = 30
    ) -> Call:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [c for c in self.calls_of(method) if where(c)]
            if found:
                return found[-1]
            time.sleep(0.05)  # polls FOR the call, with a deadline
        raise AssertionError(
            f"no {method} matching within {timeout}s; calls: "
            f"{[(c.method, c.params.get('text')) for c in self.calls]}"
        )

    def queue_update(self, update: dict[str, Any]) -> None:
        with self._lock:
            self._updates.append(update)

    def fail(
        self, method: str, status: int, description: str, *, retry_after: int | None = None
    ) -> None:
        """The next call of ``method`` fails; with ``retry_after``, as Telegram limits a bot
        (429 with ``parameters.retry_after`` seconds)."""
        with self._lock:
            self._failures.setdefault(method, []).append((status, description, retry_after))

    # --- the Bot API --------------------------------------------------------------------

    def handle(self, token: str, method: str, params: dict[str, Any]) -> tuple[int, dict]:
        with self._lock:
            self.calls.append(Call(method, token, params))
            if token != self.token:
                return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
            failures = self._failures.get(method)
            if failures:
                status, description, retry_after = failures.pop(0)
                body = {"ok": False, "error_code": status, "description": description}
                if retry_after is not None:
                    body["parameters"] = {"retry_after": retry_after}
                return status, body
            answer = getattr(self, f"_{method}", None)
            if answer is None:
                return 404, {"ok": False, "error_code": 404, "description": "Not Found"}
            return 200, {"ok": True, "result": answer(params)}

    def _getMe(self, params: dict) -> dict:
        return {"id": BOT_ID, "is_bot": True, "first_name": "Garden", "username": BOT_USERNAME}

    def _message(self, chat_id: int, message_id: int, params: dict) -> dict:
        message = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": {"id": int(chat_id), "type": "private"},
            "from": self._getMe(params),
            "text": params.get("text", ""),
        }
        if params.get("reply_markup"):
            message["reply_markup"] = params["reply_markup"]
        return message

    def _sendMessage(self, params: dict) -> dict:
        self._next_message_id += 1
        return self._message(params["chat_id"], self._next_message_id, params)

    def _editMessageText(self, params: dict) -> dict:
        return self._message(params["chat_id"], int(params["message_id"]), params)

    def _answerCallbackQuery(self, params: dict) -> bool:
        return True

    def _getUpdates(self, params: dict) -> list[dict]:
        offset = int(params.get("offset") or 0)
        # Like Telegram: asking from an offset confirms every update before it.
        self._updates = [u for u in self._updates if u["update_id"] >= offset]
        return list(self._updates)

    def _setWebhook(self, params: dict) -> bool:
        self.webhook = dict(params)
        return True

    def _deleteWebhook(self, params: dict) -> bool:
        self.webhook = {}
        return True


def _decode(params: dict[str, Any]) -> dict[str, Any]:
    """Form fields carry JSON-encoded objects (reply_markup); decode them as Telegram does."""
    out = {}
    for key, value in params.items():
        if isinstance(value, str) and value[:1] in "[{":
            try:
                value = json.loads(value)
            except ValueError:
                pass
        out[key] = value
    return out


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    api: FakeBotApi


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        # /bot<token>/<method>
        head, _, method = self.path.split("?", 1)[0].rpartition("/")
        token = head.removeprefix("/bot") if head.startswith("/bot") else ""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        kind = self.headers.get("Content-Type", "")
        if "json" in kind and raw:
            params = json.loads(raw)
        else:
            params = dict(parse_qsl(raw.decode())) if raw else {}
        status, body = self.server.api.handle(token, method, _decode(params))
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
