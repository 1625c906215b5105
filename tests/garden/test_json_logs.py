"""Logs an on-call engineer can follow: every response says its X-Request-ID (a probe's, a 404,
a 500, the API's errors), each request writes one access line, and in GARDEN_LOG_FORMAT=json
every line a web process and a Celery worker write is one JSON object carrying the role, the
request id and, while a span is current, the trace. A task a request sent logs the request's
id in the worker; the request's span carries it too."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import uuid
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.http import HttpResponse
from django.test import Client
from django.urls import include, path

# Imported before any test: building it sets logging up again (as tests/dashboard does).
from config.asgi import application
from garden import log_format
from garden.services.tokens import token_create
from groups.models import GroupRequest
from tests.conftest import wait_for
from tests.dashboard.helpers import household
from tests.groups.conftest import make_group
from tests.groups.test_tracing import Receiver, _environment, _free_port, processes
from tests.support.processes import spawn

ROOT = Path(__file__).resolve().parents[2]
HEX_ID = re.compile(r"[0-9a-f]{32}")
SECRET_QUERY = "token=gdn_not-for-any-log"


def boom(request):
    logging.getLogger("garden.tests").warning("about to fail")
    raise RuntimeError("the view fails")


def fine(request):
    return HttpResponse("fine")


# This module is also the URLconf of the tests marked urls(...): a view that fails, one that
# answers, then the site's own routes.
urlpatterns = [path("boom/", boom), path("fine/", fine), path("", include("config.urls"))]
OURS = pytest.mark.urls(__name__)


@pytest.fixture
def traces():
    """An OTLP/HTTP trace receiver on loopback (tests/groups/test_tracing.py)."""
    with closing(Receiver()) as server:
        yield server


@pytest.fixture
def access(caplog):
    caplog.set_level(logging.INFO, logger="garden.access")
    return caplog


def _access_lines(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "garden.access"]


@OURS
@pytest.mark.django_db
def test_every_response_says_its_request_id(client):
    client.raise_request_exception = False
    answers = {
        "probe": client.get("/healthz"),
        "not found": client.get("/no/such/page"),
        "API error": client.get("/api/groups"),  # not signed in
        "server error": client.get("/boom/"),
    }
    assert [a.status_code for a in answers.values()] == [200, 404, 403, 500]
    ids = [a.headers.get("X-Request-ID", "") for a in answers.values()]
    assert all(HEX_ID.fullmatch(i) for i in ids), ids
    assert len(set(ids)) == len(ids), "a new id for each request"


@OURS
@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("abc-123.X_y", True),
        ("a" * 128, True),
        ("a" * 129, False),
        ("two words", False),
        ("<script>", False),
        ("ü", False),
        ("", False),
    ],
)
def test_a_sane_incoming_request_id_is_kept_and_any_other_replaced(client, given, kept):
    answer = client.get("/fine/", headers={"X-Request-ID": given})
    said = answer.headers["X-Request-ID"]
    if kept:
        assert said == given
    else:
        assert HEX_ID.fullmatch(said) and said != given


@OURS
@pytest.mark.django_db
def test_one_access_line_a_request_without_its_query_string(client, access, owner):
    client.raise_request_exception = False
    client.force_login(owner)
    answer = client.get(f"/api/groups?{SECRET_QUERY}", headers={"X-Request-ID": "on-call-1"})
    assert answer.status_code == 200
    failed = client.get("/boom/", headers={"X-Request-ID": "on-call-2"})
    assert failed.status_code == 500

    first, second = _access_lines(access)
    assert first.levelno == logging.INFO
    assert (first.method, first.path, first.status) == ("GET", "/api/groups", 200)
    assert first.request_id == "on-call-1" and first.user_id == owner.pk
    assert isinstance(first.duration_ms, float) and first.duration_ms >= 0
    assert first.getMessage().startswith("GET /api/groups 200 ")
    assert (second.path, second.status, second.request_id) == ("/boom/", 500, "on-call-2")
    for record in access.records:
        assert "gdn_not-for-any-log" not in record.getMessage()
        assert "gdn_not-for-any-log" not in json.dumps(vars(record), default=str)
    # The view's own line and Django's line about the error carry the request's id too.
    said = {(r.name, r.request_id) for r in access.records if hasattr(r, "request_id")}
    assert ("garden.tests", "on-call-2") in said and ("django.request", "on-call-2") in said


@OURS
def test_no_access_line_when_it_is_off(client, access, settings):
    settings.GARDEN_ACCESS_LOG = False
    assert client.get("/fine/").status_code == 200
    assert _access_lines(access) == []


@pytest.mark.django_db(transaction=True)
def test_a_websocket_has_a_request_id_and_two_access_lines(access, owner):
    group = household(owner)
    client = Client()
    client.force_login(owner)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"

    async def open_and_close(origin: bytes, rid: bytes):
        headers = [(b"cookie", cookie.encode()), (b"host", b"testserver"), (b"origin", origin)]
        socket = WebsocketCommunicator(
            application, f"/ws/groups/{group.pk}/?{SECRET_QUERY}", headers=headers
        )
        socket.scope["headers"].append((b"x-request-id", rid))
        connected, _ = await socket.connect()
        await socket.disconnect()
        return connected

    assert async_to_sync(open_and_close)(b"http://testserver", b"ws-1") is True
    assert async_to_sync(open_and_close)(b"http://evil.example", b"ws-2") is False

    lines = [(r.getMessage(), r.request_id, r.status) for r in _access_lines(access)]
    path = f"/ws/groups/{group.pk}/"
    assert lines[0] == (f"WS {path} accepted", "ws-1", 101)
    assert lines[1][0].startswith(f"WS {path} 101 closed 1000 ") and lines[1][1:] == ("ws-1", 101)
    assert lines[2][0].startswith(f"WS {path} 403 closed ") and lines[2][1:] == ("ws-2", 403)
    assert len(lines) == 3
    assert all("gdn_not-for-any-log" not in line[0] for line in lines)


def _record(message: str, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("inner\nline")
        except ValueError:
            exc_info = sys.exc_info()
    record = logging.LogRecord("garden.x", logging.ERROR, __file__, 1, message, (), exc_info)
    log_format.ContextFilter().filter(record)
    return record


def test_a_json_line_is_one_line_with_its_fields_and_traceback():
    token = log_format.request_id.set("rid-7")
    try:
        line = log_format.JsonFormatter().format(_record("two\nlines", exc=True))
    finally:
        log_format.request_id.reset(token)
    assert "\n" not in line
    said = json.loads(line)
    assert said["level"] == "ERROR" and said["logger"] == "garden.x"
    assert said["message"] == "two\nlines" and said["request_id"] == "rid-7"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", said["time"])
    assert "ValueError: inner\nline" in said["exc_info"]
    assert said["role"] == log_format.role()
    assert "trace_id" not in said  # no span is current


def test_a_text_line_says_time_level_logger_and_context():
    token = log_format.request_id.set("rid-8")
    try:
        line = log_format.TextFormatter().format(_record("hello"))
    finally:
        log_format.request_id.reset(token)
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ERROR garden\.x \[\w+ request_id=rid-8\] hello",
        line,
    ), line


def test_a_celery_processes_own_handlers_write_json_lines_too():
    """Celery replaces the root logger's handlers and gives its task logger its own."""
    script = (
        "import django, logging; django.setup()\n"
        "from celery.utils.log import get_task_logger\n"
        "from config.celery import app\n"
        "from garden import log_format\n"
        "app.log.setup(loglevel='INFO')\n"
        "log_format.request_id.set('rid-9')\n"
        "logging.getLogger('garden.x').warning('from garden')\n"
        "get_task_logger('groups.tasks').warning('from a task')\n"
        "logging.getLogger('celery.worker').info('from celery')\n"
    )
    env = {**os.environ, "GARDEN_LOG_FORMAT": "json"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=ROOT,
        env=env,
    )
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    said = {line["message"]: line for line in lines}
    assert {"from garden", "from a task", "from celery"} <= set(said), done.stderr
    assert {said[m]["request_id"] for m in ("from garden", "from a task", "from celery")} == {
        "rid-9"
    }


# --- real processes: a web server and a worker ------------------------------------------------


def _stop(proc: subprocess.Popen, sig: int) -> tuple[str, str]:
    proc.send_signal(sig)
    try:
        return proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()


def _json_lines(name: str, stderr: str) -> list[dict]:
    lines = []
    for line in stderr.splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            pytest.fail(f"a line of the {name}'s stderr is not JSON: {line!r}\n{stderr[-3000:]}")
    return lines


@processes
def test_json_lines_follow_one_request_from_the_web_into_the_worker_and_its_trace(owner, traces):
    group = make_group(owner, concierge_rules=[], members={"ledger": []})
    token = token_create(owner=owner, name="logs", scopes=["read", "write"]).secret
    env = _environment(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": traces.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
    )
    env.update(GARDEN_LOG_FORMAT="json", GARDEN_LOG_LEVEL="INFO")
    from config.celery import app

    app.control.purge()
    port = _free_port()
    web = spawn([sys.executable, "manage.py", "rundashboard", f"127.0.0.1:{port}"], env, apart=True)
    worker = spawn(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=threads",
         "--concurrency=2", f"--hostname=logs-{os.getpid()}@%h", "--without-mingle",
         "--without-gossip", "--loglevel=INFO"],
        env,
        apart=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    posted_id = f"post-{uuid.uuid4().hex}"
    try:

        def answering() -> bool:
            assert web.poll() is None, web.communicate()
            try:
                return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(answering, timeout=40, interval=0.2)
        probe = httpx.get(f"{base}/healthz", headers={"X-Request-ID": "probe-1"})
        missing = httpx.get(f"{base}/api/nope?{SECRET_QUERY}")
        api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"})
        posted = api.post(
            f"/api/groups/{group.pk}/messages",
            json={"text": "Plan the week, please."},
            headers={"X-Request-ID": posted_id},
            timeout=10,
        )
        assert posted.status_code == 202, posted.text
        request = GroupRequest.objects.get(pk=posted.json()["request"]["id"])

        def finished() -> bool:
            request.refresh_from_db()
            return request.state in GroupRequest.FINISHED_STATES

        wait_for(finished, timeout=40)
        wait_for(
            lambda: any(
                s.attributes.get("garden.http.request_id") == posted_id for s in traces.snapshot()
            ),
            timeout=20,
        )
    finally:
        web_out, web_err = _stop(web, signal.SIGINT)
        worker_out, worker_err = _stop(worker, signal.SIGTERM)
        print(f"--- web ---\n{web_out}\n{web_err}\n--- worker ---\n{worker_out}\n{worker_err}")

    assert probe.headers["X-Request-ID"] == "probe-1"
    assert missing.status_code == 404 and HEX_ID.fullmatch(missing.headers["X-Request-ID"])
    assert posted.headers["X-Request-ID"] == posted_id

    web_lines = _json_lines("web", web_err)
    worker_lines = _json_lines("worker", worker_err)
    for line in web_lines + worker_lines:
        assert {"time", "level", "logger", "message", "role"} <= set(line), line
        assert SECRET_QUERY not in json.dumps(line)
    assert {line["role"] for line in web_lines} == {"web"}
    assert {line["role"] for line in worker_lines} == {"worker"}

    access = {line["request_id"]: line for line in web_lines if line["logger"] == "garden.access"}
    assert access["probe-1"]["path"] == "/healthz" and access["probe-1"]["status"] == 200
    assert access[missing.headers["X-Request-ID"]]["path"] == "/api/nope"
    assert access[missing.headers["X-Request-ID"]]["status"] == 404
    sent = access[posted_id]
    assert (sent["method"], sent["status"], sent["user_id"]) == ("POST", 202, owner.pk)
    assert sent["path"] == f"/api/groups/{group.pk}/messages"
    assert HEX_ID.fullmatch(sent["trace_id"]), "the request's span was current"

    # The worker's lines for the step the request sent carry the request's id.
    stepped = [line for line in worker_lines if line.get("request_id") == posted_id]
    assert stepped, worker_err[-3000:]
    # The request's first task, which may run the step itself (groups/loop/step.py).
    assert any(line.get("task_name") == "groups.start_next_request" for line in stepped), stepped
    assert all(line["role"] == "worker" and line.get("task_id") for line in stepped), stepped
    assert not [line for line in worker_lines if line.get("request_id") not in (None, posted_id)], (
        "no other id reaches the worker"
    )

    # The HTTP request's span says the id.
    (server,) = [
        s for s in traces.snapshot() if s.attributes.get("garden.http.request_id") == posted_id
    ]
    assert server.service == "garden-web"
    assert server.span.trace_id.hex() == sent["trace_id"]
