"""Traces across real processes: a web server (rundashboard, daphne) and a Celery worker on
PostgreSQL and Redis export to an OTLP/HTTP receiver on loopback. One request with a member's
tool that waits for approval is one trace, from the web process that accepted the message
through the worker that stepped it; its model calls carry the tokens the provider reported;
no message text, argument or result is on a span. With OTEL_* unset, nothing is exported."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto

from garden.models import Agent
from garden.services.tokens import token_create
from groups.models import Approval, GroupRequest
from tests.conftest import wait_for
from tests.groups.helpers import on_server
from tests.support.databases import database_url
from tests.support.processes import interruptible
from tests.support.providers import openai_reply

pytestmark = pytest.mark.django_db


def processes(test):
    """A test with a real web server and worker: on PostgreSQL and Redis, its rows committed."""
    for mark in (
        pytest.mark.postgres,
        pytest.mark.redis,
        pytest.mark.django_db(transaction=True),
        pytest.mark.timeout(120),
    ):
        test = mark(test)
    return test


ROOT = Path(__file__).resolve().parents[2]

TEXT = "Write down the savings plan for the Okonkwo-Vale household, please."
ARGUMENTS = {"title": "Savings plan", "content": "Save 812 a month towards the roof."}
ASK = ("call-ask", "group.ask", {"member": "ledger", "request": "Write the plan down."})
WRITE = ("call-write", "file.write", ARGUMENTS)
# The provider's answers in the order the steps ask, each with the usage it reports.
REPLIES = [
    openai_reply("Asking Ledger.", [ASK], usage=(121, 17)),
    openai_reply("Writing it.", [WRITE], usage=(233, 29)),
    openai_reply("Saved the plan in the thread.", usage=(347, 13)),
    openai_reply("The plan is written and kept.", usage=(409, 23)),
]
# What must never be on a span while content capture is off.
SECRETS = [
    TEXT,
    "Okonkwo-Vale",
    ARGUMENTS["content"],
    "Write the plan down.",
    "Saved the plan in the thread.",
    "The plan is written and kept.",
]


@dataclass
class Exported:
    """One span as the receiver decoded it, with its resource's attributes."""

    resource: dict[str, Any]
    span: SpanProto

    @property
    def attributes(self) -> dict[str, Any]:
        return _attributes(self.span.attributes)

    @property
    def service(self) -> str:
        return self.resource.get("service.name", "")


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return _attributes(v.kvlist_value.values)
    return getattr(v, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1: POST /v1/traces, protobuf, kept in order."""

    def __init__(self, port: int = 0) -> None:
        self.spans: list[Exported] = []
        self.posts = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.take(self.path, body)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def take(self, path: str, body: bytes) -> None:
        assert path == "/v1/traces", path
        export = ExportTraceServiceRequest()
        export.ParseFromString(body)
        with self._lock:
            self.posts += 1
            for resource_spans in export.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    self.spans += [Exported(resource, s) for s in scope_spans.spans]

    def snapshot(self) -> list[Exported]:
        with self._lock:
            return list(self.spans)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def team(group_factory, owner, provider_server):
    """Concierge asks Ledger; Ledger writes a file, which waits for the owner's approval. Both
    answer from the loopback provider, which reports each call's usage."""
    group = group_factory(concierge_rules=[], members={"ledger": []})
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    ledger.enabled_tools, ledger.approval_tools = ["file.write"], ["file.write"]
    ledger.save(update_fields=["enabled_tools", "approval_tools"])
    on_server(owner, group.coordinator, provider_server)
    on_server(owner, ledger, provider_server)
    for reply in REPLIES:
        provider_server.reply(200, reply)
    return group


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _environment(otel: dict[str, str]) -> dict[str, str]:
    database = settings.DATABASES["default"]
    if database["ENGINE"] != "django.db.backends.postgresql":
        pytest.skip("the web server and worker need the test database by URL (PostgreSQL)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        DATABASE_URL=database_url(),
        REDIS_URL=settings.REDIS_URL,
        GARDEN_EGRESS_ALLOW_PROVIDERS="127.0.0.1",
        **otel,
    )
    return env


@contextmanager
def web_and_worker(env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen, subprocess.Popen]]:
    """``rundashboard`` (serving only: REDIS_URL is set) and a threads worker, both stopped
    (and so flushed) when the block ends."""
    from config.celery import app

    app.control.purge()
    port = _free_port()
    web = subprocess.Popen(
        [sys.executable, "manage.py", "rundashboard", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=interruptible,  # it is stopped with SIGINT
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=threads",
         "--concurrency=2", f"--hostname=tracing-{os.getpid()}@%h", "--without-mingle",
         "--without-gossip", "--loglevel=WARNING"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:

        def answering() -> bool:
            assert web.poll() is None, web.communicate()[0]
            try:
                return httpx.get(f"{base}/dashboard/login/", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(answering, timeout=40, interval=0.2)
        yield base, web, worker
    finally:
        web.send_signal(signal.SIGINT)
        worker.send_signal(signal.SIGTERM)
        for name, proc in (("web", web), ("worker", worker)):
            try:
                output = proc.communicate(timeout=30)[0]
            except subprocess.TimeoutExpired:
                proc.kill()
                output = proc.communicate()[0]
            print(f"--- {name} ---\n{output}")  # shown when the test fails


CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def run_the_request(base: str, owner, group) -> GroupRequest:
    """Post the message and approve Ledger's file through the API, as a script would (an
    access token), and wait until the request has completed."""
    # Deciding an approval needs the manage scope.
    scopes = ["read", "write", "manage"]
    token = token_create(owner=owner, name="tracing", scopes=scopes).secret
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    # A client's own trace context is not what the request joins (garden/telemetry.py).
    posted = api.post(
        f"/api/groups/{group.pk}/messages",
        json={"text": TEXT},
        headers={"traceparent": f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01"},
    )
    assert posted.status_code == 202, posted.text
    request = GroupRequest.objects.get(pk=posted.json()["request"]["id"])
    approval = wait_for(
        lambda: Approval.objects.filter(request=request, status="pending").first(), timeout=30
    )
    decided = api.post(f"/api/approvals/{approval.pk}/decide", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text

    def finished() -> bool:
        request.refresh_from_db()
        return request.state in GroupRequest.FINISHED_STATES

    wait_for(finished, timeout=40)
    assert request.state == "completed", (request.outcome_code, request.outcome)
    return request


def strings(exported: Exported) -> list[str]:
    """Every string a span carries: its name, attributes, events', links' and resource's."""
    found: list[str] = [exported.span.name]

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)

    walk(exported.attributes)
    walk(exported.resource)
    for e in exported.span.events:
        found.append(e.name)
        walk(_attributes(e.attributes))
    for link in exported.span.links:
        walk(_attributes(link.attributes))
    return found


LOCK_EVENTS = {"garden.lock.acquired", "garden.lock.extended"}


@processes
def test_one_request_is_one_trace_across_the_web_process_and_the_worker(
    owner, team, provider_server, receiver
):
    env = _environment(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "GARDEN_TRACE_SQL": "true",
        }
    )
    with web_and_worker(env) as (base, web, worker):
        request = run_the_request(base, owner, team)
        # The last step's span ends after the request row says completed: wait until it is in.
        wait_for(
            lambda: any(
                s.attributes.get("garden.step.outcome") == "completed" for s in receiver.snapshot()
            ),
            timeout=20,
        )
    spans = receiver.snapshot()

    # The request's trace, as its row keeps it.
    assert request.trace_context.startswith("00-"), request.trace_context
    trace_id = bytes.fromhex(request.trace_context.split("-")[1])
    in_trace = [s for s in spans if s.span.trace_id == trace_id]
    ours = [s for s in spans if s.attributes.get("garden.request.id") == request.pk]
    assert ours and all(s.span.trace_id == trace_id for s in ours), "the request is one trace"

    # Whatever trace the client said it was in (a traceparent header) is not the request's.
    assert CLIENT_TRACE not in request.trace_context
    assert not [s for s in spans if s.span.trace_id == bytes.fromhex(CLIENT_TRACE)]
    # It starts in the web process, under the HTTP request that posted the message.
    (accepted,) = [s for s in in_trace if s.span.name == "garden.request"]
    assert accepted.service == "garden-web" and accepted.resource["process.pid"] == web.pid
    by_id = {s.span.span_id: s for s in in_trace}
    http = by_id[accepted.span.parent_span_id]
    assert http.span.kind == SpanProto.SPAN_KIND_SERVER and http.service == "garden-web"
    assert http.attributes.get("http.request.method", http.attributes.get("http.method")) == "POST"
    # The approval decided through the API is in it too (the web process).
    (decided,) = [s for s in in_trace if s.span.name == "garden.approval.decided"]
    assert decided.service == "garden-web" and decided.span.links, "linked to the decision"

    # The steps ran in the worker, each a span of this trace.
    steps = [s for s in in_trace if s.span.name == "garden.step"]
    assert {s.service for s in steps} == {"garden-worker"}
    assert {s.resource["process.pid"] for s in steps} == {worker.pid}
    outcomes = [s.attributes.get("garden.step.outcome") for s in steps]
    assert "awaiting_approval" in outcomes and "completed" in outcomes, outcomes
    (paused,) = [s for s in steps if s.attributes["garden.step.outcome"] == "awaiting_approval"]
    (asked,) = [e for e in paused.span.events if e.name == "garden.approval.requested"]
    assert _attributes(asked.attributes)["gen_ai.tool.name"] == "file.write"
    # Every step holds the group's lock: taken for it, or kept from the step before it when
    # the delivery ran it in place (groups/loop/step.py); the approval's resume takes it anew.
    held = [{e.name for e in s.span.events} & LOCK_EVENTS for s in steps]
    assert all(len(h) == 1 for h in held), held
    assert {"garden.lock.acquired", "garden.lock.extended"} == set().union(*held), held
    names = {s.span.name for s in in_trace}
    assert {"garden.claim", "garden.projection", "garden.reservation"} <= names, names
    # With GARDEN_TRACE_SQL, the step's statements are spans of it (psycopg's instrumentation).
    statements = [
        s
        for s in in_trace
        if s.service == "garden-worker"
        and "postgresql" in (s.attributes.get("db.system"), s.attributes.get("db.system.name"))
    ]
    assert statements, "the worker's SQL is traced"

    # Each model call, with the tokens the provider reported, in the order they were made.
    calls = sorted(
        (s for s in in_trace if s.span.name == "chat m"), key=lambda s: s.span.start_time_unix_nano
    )
    assert [
        (s.attributes["gen_ai.usage.input_tokens"], s.attributes["gen_ai.usage.output_tokens"])
        for s in calls
    ] == [(r["usage"]["prompt_tokens"], r["usage"]["completion_tokens"]) for r in REPLIES]
    assert (request.input_tokens, request.output_tokens) == (
        sum(s.attributes["gen_ai.usage.input_tokens"] for s in calls),
        sum(s.attributes["gen_ai.usage.output_tokens"] for s in calls),
    )
    for call in calls:
        assert call.service == "garden-worker" and call.span.kind == SpanProto.SPAN_KIND_CLIENT
        assert call.attributes["gen_ai.operation.name"] == "chat"
        assert call.attributes["gen_ai.provider.name"] == "openai"
        assert call.attributes["gen_ai.request.model"] == "m"
        assert call.attributes["garden.reservation.purpose"] == "working"
    assert [c.attributes["gen_ai.agent.name"] for c in calls] == [
        "concierge",
        "ledger",
        "ledger",
        "concierge",
    ]
    # Why each stopped, as the adapter reads it (garden's words for the provider's reason).
    assert calls[0].attributes["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert calls[-1].attributes["gen_ai.response.finish_reasons"] == ["end_turn"]

    # The approved tool ran once, in the worker, in this trace.
    (tool,) = [s for s in in_trace if s.span.name == "execute_tool file.write"]
    assert tool.service == "garden-worker"
    assert tool.attributes["gen_ai.tool.call.id"] == "call-write"
    assert tool.attributes["garden.tool.outcome"] == "ok"
    (executed,) = [s for s in in_trace if s.span.name == "garden.approval.execute"]
    assert by_id[tool.span.parent_span_id].span.span_id == executed.span.span_id

    # No text of the conversation, no argument, no result: content capture is off.
    for exported in spans:
        for value in strings(exported):
            leaked = [secret for secret in SECRETS if secret in value]
            assert not leaked, (exported.span.name, value)


@pytest.fixture
def default_receiver() -> Iterator[Receiver]:
    """A receiver where an OTLP/HTTP exporter with no endpoint set sends: localhost:4318."""
    try:
        server = Receiver(port=4318)
    except OSError:
        # Another program on this machine holds the port the test must watch; in CI
        # (GARDEN_REQUIRE_SERVICES=1) that is a failure, never a quiet pass.
        reason = "127.0.0.1:4318 (OTLP/HTTP's default port) is taken by another program"
        if os.environ.get("GARDEN_REQUIRE_SERVICES") == "1":
            pytest.fail(f"GARDEN_REQUIRE_SERVICES=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    yield server
    server.close()


@processes
def test_with_otel_unset_nothing_is_exported(owner, team, default_receiver):
    env = _environment({})
    with web_and_worker(env) as (base, _web, _worker):
        request = run_the_request(base, owner, team)
    # The request completed and both processes have exited (a batching exporter flushes on
    # the way out): whatever either would ever have sent has been sent.
    assert request.trace_context == ""
    assert default_receiver.posts == 0 and default_receiver.snapshot() == []


# --- in this process: what a span says with content capture on and off -----------------------


@pytest.fixture
def exported(monkeypatch):
    """Traces on in this process as ``setup_tracing`` turns them on, exporting to memory (the
    SDK's own exporter) instead of a collector; ``capture`` sets the content switch."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from garden import telemetry

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    monkeypatch.setattr(telemetry, "_tracer", provider.get_tracer("garden"))
    monkeypatch.setattr(telemetry, "ON", True)

    def capture(on: bool) -> InMemorySpanExporter:
        monkeypatch.setattr(telemetry, "CAPTURE_CONTENT", on)
        return memory

    yield capture
    provider.shutdown()


def _suspended(team) -> GroupRequest:
    from groups.services.requests import request_create
    from tests.support.driving import drive

    request = request_create(group=team, text=TEXT)
    drive(request, "awaiting_approval")
    return request


def test_content_stays_out_of_spans_unless_capture_is_on(exported, team, provider_server):
    memory = exported(False)
    request = _suspended(team)
    spans = memory.get_finished_spans()
    steps = [s for s in spans if s.name == "garden.step"]
    assert [s.attributes["garden.step.outcome"] for s in steps] == ["asked", "awaiting_approval"]
    assert {s.context.trace_id for s in spans} == {int(request.trace_context.split("-")[1], 16)}, (
        "one trace, begun where the message was accepted"
    )
    for span in spans:
        for value in [
            *span.attributes.values(),
            *(a for e in span.events for a in e.attributes.values()),
        ]:
            assert not any(secret in str(value) for secret in SECRETS), (span.name, value)
    assert not any(k.startswith("gen_ai.input") for s in spans for k in s.attributes)


def test_with_capture_on_the_model_calls_carry_their_messages_bounded(
    exported, team, provider_server
):
    from garden import telemetry

    memory = exported(True)
    _suspended(team)
    calls = [s for s in memory.get_finished_spans() if s.name == "chat m"]
    assert len(calls) == 2
    asking, writing = calls
    assert TEXT in asking.attributes["gen_ai.input.messages"]
    assert "group.ask" in asking.attributes["gen_ai.output.messages"]
    assert ARGUMENTS["content"] in writing.attributes["gen_ai.output.messages"]
    assert all(
        len(v) <= telemetry.CONTENT_MAX_CHARS + 1
        for s in calls
        for k, v in s.attributes.items()
        if k.startswith("gen_ai.") and isinstance(v, str)
    )


@pytest.mark.redis
def test_a_step_the_sweeper_sends_again_joins_the_request_trace_linked_to_the_sweep(
    exported, team, provider_server
):
    from datetime import timedelta

    from django.utils import timezone

    from garden import telemetry
    from groups.loop.step import advance_request
    from groups.services.request_sweep import request_sweep
    from groups.services.requests import request_create, request_start_next

    memory = exported(False)
    request = request_create(group=team, text=TEXT)
    request_start_next(group_id=team.pk)
    # Its first step was lost (a crash between commit and send): the sweeper sends it again.
    GroupRequest.objects.filter(pk=request.pk).update(
        updated_at=timezone.now() - timedelta(hours=1)
    )
    with telemetry._tracer.start_as_current_span("beat sweep") as sweep:
        assert request_sweep(older_than_seconds=60)["continued"] == 1
    request.refresh_from_db()
    with telemetry._tracer.start_as_current_span("the sweeper's task") as sent:
        advance_request(request_id=request.pk, fence=request.fence, group_id=team.pk)

    trace_id = int(request.trace_context.split("-")[1], 16)
    spans = memory.get_finished_spans()
    (recover,) = [s for s in spans if s.name == "garden.sweep.recover"]
    assert recover.context.trace_id == trace_id
    assert recover.attributes["garden.sweep.action"] == "continued"
    assert [link.context.span_id for link in recover.links] == [sweep.get_span_context().span_id]
    (step,) = [s for s in spans if s.name == "garden.step"]
    assert step.context.trace_id == trace_id and step.attributes["garden.step.outcome"] == "asked"
    assert [link.context.span_id for link in step.links] == [sent.get_span_context().span_id]


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, ["django"]),
        ({"GARDEN_TRACE_SQL": "true"}, ["django", "psycopg"]),
        ({"GARDEN_TRACE_CELERY": "true"}, ["django", "celery"]),
        ({"GARDEN_TRACE_SQL": "false", "GARDEN_TRACE_CELERY": "no"}, ["django"]),
        (
            {
                "GARDEN_TRACE_SQL": "true",
                "GARDEN_TRACE_CELERY": "true",
                "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "celery, psycopg",
            },
            ["django"],
        ),
    ],
)
def test_sql_statements_are_spans_only_when_the_operator_asks(environ, wanted):
    from garden import telemetry_setup

    assert telemetry_setup.instrumentations(environ) == wanted


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "garden", "OTEL_TRACES_SAMPLER": "always_on"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "false"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
    ],
)
def test_traces_are_on_only_when_an_otlp_endpoint_is_set_and_nothing_turns_them_off(environ, on):
    from garden import telemetry

    assert telemetry.configured(environ) is on


def test_a_task_runs_in_the_context_it_was_sent_from(exported):
    """garden's own task header carries the sender's context to the worker (Celery's
    instrumentation is off by default): a step's span links to a sender in another trace."""
    from opentelemetry import trace

    from garden import telemetry

    exported(False)
    assert telemetry.task_headers() == {}, "no span current: nothing to carry"
    with telemetry._tracer.start_as_current_span("the sweeper's task") as sender:
        headers = telemetry.task_headers()
    sent = sender.get_span_context()
    assert list(headers) == [telemetry.TASK_HEADER]
    carried = headers[telemetry.TASK_HEADER]
    assert carried.startswith(f"00-{sent.trace_id:032x}-{sent.span_id:016x}-")

    with telemetry.sent_from(headers[telemetry.TASK_HEADER]):
        current = trace.get_current_span().get_span_context()
    assert (current.trace_id, current.span_id) == (sent.trace_id, sent.span_id)
    with telemetry.sent_from("not a traceparent"):
        assert not trace.get_current_span().get_span_context().is_valid
