"""Errors reach Sentry (SENTRY_DSN) from a view and a task, through the real SDK and its HTTP
transport to a receiver on loopback — with nothing an owner wrote and no key or token in them:
not the message text, the exception's text, a local variable, the request's body, query
string, cookies or Authorization header. Without SENTRY_DSN the SDK is never loaded."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

TEXT = "Move 4,000 from the Okonkwo-Vale savings into the roof fund."
KEY = "sk-live-4f9a0c2e7b1d83a6"
TOKEN = "gdn_Zq8tD2mW9xV4pL7rK1sN6bH3cF0jY5aE"
COOKIE = "a1b2c3d4e5f6sessionvalue"
QUERY = "ticket-7c31e0"
SECRETS = [TEXT, "Okonkwo-Vale", KEY, TOKEN, COOKIE, QUERY]

# Run with SENTRY_DSN set: a view that logs and fails with the owner's text and a key in a local
# variable, asked with a body, a query, a cookie and a bearer token; then a task that fails
# with the same.
SCRIPT = """
import asyncio, logging, sys
import django
django.setup()
import httpx
from django.test.utils import setup_test_environment, override_settings
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
import sentry_sdk
from config.celery import app

TEXT, KEY, TOKEN, COOKIE, QUERY = sys.argv[1:6]


@csrf_exempt
def boom(request):
    api_key = KEY
    logging.getLogger("garden.tests").error("the owner wrote %s", TEXT)
    raise ValueError(f"failed on {TEXT} with {api_key}")


urlpatterns = [path("boom/", boom)]


@app.task(name="tests.boom")
def boom_task(text, key):
    secret = key
    raise RuntimeError(f"task failed on {text} with {secret}")


setup_test_environment()
with override_settings(ROOT_URLCONF="__main__"):
    from config.asgi import application

    async def ask():
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as web:
            return await web.post(
                f"/boom/?q={QUERY}",
                json={"text": TEXT, "key": KEY},
                headers={
                    "Authorization": f"Bearer {TOKEN}",
                    "Cookie": f"sessionid={COOKIE}",
                    "X-Request-ID": "sentry-1",
                },
            )

    answer = asyncio.run(ask())
    assert answer.status_code == 500, answer.status_code
    assert answer.headers["X-Request-ID"] == "sentry-1"
boom_task.apply(args=(TEXT, KEY))
sentry_sdk.flush(timeout=20)
"""


class Receiver:
    """Sentry's envelope endpoint on 127.0.0.1: every POST body kept, decompressed."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with receiver._lock:
                    receiver.bodies.append(body)
                    receiver.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    @property
    def dsn(self) -> str:
        return f"http://public@127.0.0.1:{self._httpd.server_address[1]}/1"

    def events(self) -> list[dict[str, Any]]:
        """The ``event`` items of every envelope received."""
        return [
            json.loads(payload) for item, payload in self._items() if item.get("type") == "event"
        ]

    def _items(self) -> Iterator[tuple[dict[str, Any], bytes]]:
        """Each envelope: its header line, then items, each a header line and a payload (of
        the header's ``length``, or up to the end of its line)."""
        for body in list(self.bodies):
            at = body.index(b"\n") + 1
            while at < len(body):
                end = body.find(b"\n", at)
                end = len(body) if end == -1 else end
                line, at = body[at:end], end + 1
                if not line.strip():
                    continue
                item = json.loads(line)
                length = item.get("length")
                if length is None:
                    end = body.find(b"\n", at)
                    end = len(body) if end == -1 else end
                    payload, at = body[at:end], end + 1
                else:
                    payload, at = body[at : at + length], at + length + 1
                yield item, payload

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The embedded default (SQLite under its own var dir, no Redis): the script's view and
    task touch no database."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL") and not k.startswith("SENTRY_")
    }
    env.update(GARDEN_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="config.settings", **extra)
    return env


def test_a_failing_view_and_task_reach_sentry_without_text_keys_cookies_or_tokens(
    receiver, tmp_path
):
    env = _environment(
        tmp_path,
        SENTRY_DSN=receiver.dsn,
        SENTRY_ENVIRONMENT="staging-eu",
        SENTRY_RELEASE="garden@1.2.3",
    )
    done = _run(env, TEXT, KEY, TOKEN, COOKIE, QUERY)
    assert done.returncode == 0, done.stderr[-3000:]

    assert receiver.bodies and all(p == "/api/1/envelope/" for p in receiver.paths)
    everything = b"\n".join(receiver.bodies).decode()
    for secret in SECRETS:
        assert secret not in everything, secret
    for header in ("Authorization", "Cookie", "sessionid"):
        assert header.lower() not in everything.lower(), header

    events = receiver.events()
    errors = {e["exception"]["values"][-1]["type"]: e for e in events if e.get("exception")}
    assert {"ValueError", "RuntimeError"} <= set(errors), [e.get("exception") for e in events]
    view, task = errors["ValueError"], errors["RuntimeError"]
    for event in events:
        assert event["environment"] == "staging-eu" and event["release"] == "garden@1.2.3"
        assert "user" not in event
    # What is left says where it broke: the path, the method, the frames, the request id.
    assert view["request"]["method"] == "POST"
    assert view["request"]["url"].endswith("/boom/")
    assert set(view["request"]) <= {"method", "url", "headers"}
    headers = {k.lower(): v for k, v in view["request"]["headers"].items()}
    assert headers["x-request-id"] == "sentry-1"
    assert set(headers) <= {"content-type", "content-length", "user-agent", "x-request-id"}
    assert view["tags"]["garden.role"] == "web"
    assert view["tags"]["request_id"] == "sentry-1"
    functions = [f["function"] for f in view["exception"]["values"][-1]["stacktrace"]["frames"]]
    assert functions[-1] == "boom"
    assert all("vars" not in f for f in view["exception"]["values"][-1]["stacktrace"]["frames"])
    assert task["extra"] == {"celery-job": {"task_name": "tests.boom"}}
    # The line the view logged at ERROR is an event too, its text taken out.
    logged = [e for e in events if e.get("logger") == "garden.tests"]
    assert logged and all(e["logentry"] == {"message": "[Filtered]"} for e in logged)


def test_without_a_dsn_the_sdk_is_not_loaded(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, django; django.setup(); import config.celery; "
            "print('sentry_sdk' in sys.modules)",
        ],
        cwd=ROOT,
        env=_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "False", done.stderr
