"""Repeated log lines are bounded: a server's junk answer that makes the MCP SDK log one warning
per bad line reaches the console a bounded number of times, with one line saying how many
were left out (garden/logs.py RepeatFilter, installed on the handlers by settings.LOGGING)."""

from __future__ import annotations

import io
import logging
import subprocess
import sys

import pytest

from garden import mcp_client
from garden.logs import RepeatFilter
from tests.mcp_server import serving

pytestmark = pytest.mark.django_db

JUNK_BYTES = 300_000


def junk_sse_app(event: bytes):
    """Answers every POST with about 300 kB of server-sent events the SDK cannot use."""

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        chunk = event * (100_000 // len(event))
        for _ in range(JUNK_BYTES // len(chunk)):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    return app


class OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).replace("\n", "\\n")


@pytest.fixture
def console():
    """What the console handler settings.LOGGING installed on the root logger writes, one
    record a line. Its repeat bound starts afresh (a copy of the console's, same limit and
    window): an earlier test's call site whose window ends during this one would otherwise
    write its summary line here."""
    (handler,) = [h for h in logging.getLogger().handlers if h.get_name() == "console"]
    out = io.StringIO()
    previous, formatter = handler.setStream(out), handler.formatter
    bounds = [f for f in handler.filters if isinstance(f, RepeatFilter)]
    fresh = [RepeatFilter(limit=f.limit, window=f.window) for f in bounds]
    for old, new in zip(bounds, fresh, strict=True):
        handler.removeFilter(old)
        handler.addFilter(new)
    handler.setFormatter(OneLine())
    try:
        yield out
    finally:
        handler.setStream(previous)
        handler.setFormatter(formatter)
        for old, new in zip(bounds, fresh, strict=True):
            handler.removeFilter(new)
            handler.addFilter(old)


@pytest.mark.parametrize(
    "event",
    [
        b"event: junk\ndata: x\n\n",  # the SDK warns "Unknown SSE event" for each one
        # a notification the SDK cannot validate: it warns for each one, quoting it
        b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/x","params":{}}\n\n',
    ],
)
def test_a_junk_answer_reaches_the_console_a_bounded_number_of_times(console, settings, event):
    settings.GARDEN_EGRESS_ALLOW_MCP = ["127.0.0.1"]
    with serving(junk_sse_app(event)) as url:
        with pytest.raises(mcp_client.McpFailure):
            mcp_client.list_tools(
                mcp_client.Endpoint(url=url), owner_id=None, timeout=3, max_bytes=4_000_000
            )
    lines = console.getvalue().splitlines()
    assert 1 <= len(lines) <= settings.LOGGING["filters"]["repeats"]["limit"]


def test_past_the_limit_records_of_one_line_are_left_out_and_then_counted():
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    now = [0.0]
    handler = Keep()
    handler.addFilter(RepeatFilter(limit=3, window=60, clock=lambda: now[0]))
    log = logging.getLogger("tests.repeats")
    log.addHandler(handler)
    log.propagate = False
    try:
        for i in range(100):
            log.warning(f"bad line {i}")  # one call site, a different text each time
        log.warning("another line")
        assert seen == ["bad line 0", "bad line 1", "bad line 2", "another line"]
        now[0] = 61.0
        log.warning("after the window")
    finally:
        log.removeHandler(handler)
        log.propagate = True
    assert seen[4:] == [
        "bad line 0 … repeated 97 times more in 61 s; those were left out",
        "after the window",
    ]


def test_a_celery_workers_own_log_handlers_bound_repeats_too():
    script = (
        "import django, logging; django.setup()\n"
        "from config.celery import app\n"
        "app.log.setup(loglevel='WARNING')\n"
        "for i in range(500): logging.getLogger('mcp.x').warning(f'Unknown SSE event: {i}')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    lines = [line for line in done.stderr.splitlines() if "Unknown SSE event" in line]
    assert 1 <= len(lines) <= 20, done.stderr[-2000:]
