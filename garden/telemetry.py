"""Traces (OpenTelemetry): one trace per group request, from the web process that accepted the
message through every worker that stepped it, exported over OTLP/HTTP when the operator sets
the standard ``OTEL_*`` variables — and, when not, nothing: every helper here is a flag check.

The request's trace is stored on its row (``GroupRequest.trace_context``, a W3C traceparent),
so a step sent by the sweeper, a retry or an approval decision joins it too; the context that
sent it, when it belongs to another trace, is a link. Message text, tool arguments and results
stay out of spans unless ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is true.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagate import set_global_textmap
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger(__name__)

# Set once per process by ``setup_tracing``; every helper below returns at once while False.
ON = False
# OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: messages, arguments and results on spans.
CAPTURE_CONTENT = False
# The longest content attribute (characters), when content is captured.
CONTENT_MAX_CHARS = 8192

_tracer: trace.Tracer = trace.NoOpTracer()
_setup_lock = threading.Lock()
_propagator = TraceContextTextMapPropagator()
_F = TypeVar("_F", bound=Callable[..., Any])

SERVICE_WEB = "garden-web"
SERVICE_WORKER = "garden-worker"
SERVICE_BEAT = "garden-beat"


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def configured(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the operator asked for traces: an OTLP endpoint is set, the SDK is not disabled
    and the traces exporter is not ``none``."""
    if _true(environ.get("OTEL_SDK_DISABLED")):
        return False
    if (environ.get("OTEL_TRACES_EXPORTER") or "").strip().lower() == "none":
        return False
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def setup_tracing(service_name: str) -> bool:
    """Turn traces on for this process when ``configured()``: the SDK's tracer provider with a
    batching OTLP/HTTP exporter (the operator's collector, not garden's egress policy), and the
    Django and Celery instrumentation (and psycopg's, ``instrumentations``). ``service_name`` unless OTEL_SERVICE_NAME
    (or service.name in OTEL_RESOURCE_ATTRIBUTES) names it. Once per process; True when on."""
    global ON, CAPTURE_CONTENT, _tracer
    with _setup_lock:
        if ON or not configured():
            return ON
        try:
            _tracer = _start_sdk(service_name)
        except Exception:  # a collector setting that cannot be used must not stop the process
            log.exception("traces stay off: the OpenTelemetry SDK could not be set up")
            return False
        CAPTURE_CONTENT = _true(
            os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        )
        ON = True
    return True


class _HandOnOnly(TraceContextTextMapPropagator):
    """W3C trace context that is injected (into Celery's task headers) but never read from a
    request's headers."""

    def extract(self, carrier: Any, context: Any = None, getter: Any = None) -> Any:
        return context if context is not None else Context()


def instrumentations(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The contrib instrumentations a traced process turns on: Django's; Celery's (a publish and
    a run span for every task, the step's twice over) only with GARDEN_TRACE_CELERY=true, and
    psycopg's (a span per SQL statement, several a step) only with GARDEN_TRACE_SQL=true: each
    would more than double what a step's traces cost. Without Celery's, garden carries the
    sender's context in its own task header (``task_headers``). Any named in the standard
    OTEL_PYTHON_DISABLED_INSTRUMENTATIONS (comma-separated) stay off."""
    wanted = ["django"]
    if _true(environ.get("GARDEN_TRACE_CELERY")):
        wanted.append("celery")
    if _true(environ.get("GARDEN_TRACE_SQL")):
        wanted.append("psycopg")
    disabled = {
        name.strip().lower()
        for name in (environ.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS") or "").split(",")
    }
    return [name for name in wanted if name not in disabled]


def _start_sdk(service_name: str) -> trace.Tracer:
    # Imported here: a process without traces never loads the SDK or the instrumentation.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes: dict[str, Any] = {"process.pid": os.getpid()}
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    if not named:
        attributes[SERVICE_NAME] = service_name
    if service_name == SERVICE_WEB:
        # A client's traceparent is not trusted: an owner would choose the trace a request
        # joins in the operator's backend, and whether it is sampled. The web process starts
        # its own traces and still hands them on (to the workers, in the task headers).
        set_global_textmap(_HandOnOnly())
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    # Prometheus' scrapes are not requests anyone follows (OTEL_PYTHON_DJANGO_EXCLUDED_URLS
    # replaces this).
    excluded = None if "OTEL_PYTHON_DJANGO_EXCLUDED_URLS" in os.environ else "metrics$"
    for name in instrumentations():
        if name == "django":
            DjangoInstrumentor().instrument(excluded_urls=excluded)
        elif name == "celery":
            CeleryInstrumentor().instrument()
        elif name == "psycopg":
            PsycopgInstrumentor().instrument(enable_commenter=False)
    # No httpx instrumentation: every outbound client garden has goes where an owner or a third
    # party points it (a provider's base URL, an MCP server, a webhook), and the instrumentation
    # always adds the site's traceparent to the request. The model call's and the tool's own
    # spans time those exchanges instead.
    return provider.get_tracer("garden")


# --- the request's trace ---------------------------------------------------------------------


def _parent(trace_context: str) -> Any:
    """The context of a stored traceparent, or None when there is none (or it cannot be read)."""
    if not trace_context:
        return None
    context = _propagator.extract({"traceparent": trace_context})
    if not trace.get_current_span(context).get_span_context().is_valid:
        return None
    return context


def _traceparent(span: trace.Span) -> str:
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent", "")[:128]


# The Celery message header that carries the context a task was sent from.
TASK_HEADER = "garden_traceparent"


def task_headers() -> dict[str, str]:
    """Headers for a task being sent: the current span's context, when traces are on and a
    span is current (a step sending the next, the web accepting a message, the sweeper)."""
    if not ON:
        return {}
    span = trace.get_current_span()
    if not span.get_span_context().is_valid:
        return {}
    return {TASK_HEADER: _traceparent(span)}


@contextlib.contextmanager
def sent_from(traceparent: str | None) -> Iterator[None]:
    """Run a task in the context it was sent from (``task_headers``): a step's span links to
    it when it is another trace's (the sweeper's, a decision's)."""
    context = _parent(traceparent or "") if ON else None
    if context is None:
        yield
        return
    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)


class Accepted:
    """The ``garden.request`` span of a message being accepted: its ``traceparent`` goes on the
    new GroupRequest row, in the same write; ``accepted`` names the row and ends the span."""

    __slots__ = ("span", "traceparent")

    def __init__(self, span: trace.Span | None, traceparent: str) -> None:
        self.span, self.traceparent = span, traceparent

    def accepted(self, *, request_id: int) -> None:
        if self.span is not None:
            self.span.set_attribute("garden.request.id", request_id)
            self.span.end()


_NOT_TRACED = Accepted(None, "")


def request_started(*, group_id: int, source: str = "") -> Accepted:
    """Start the request's trace: a ``garden.request`` span, child of whatever is current (the
    HTTP request that posted the message), whose traceparent the request row keeps."""
    if not ON:
        return _NOT_TRACED
    attributes: dict[str, Any] = {"garden.group.id": group_id}
    if source:
        attributes["garden.request.source"] = source
    span = _tracer.start_span("garden.request", attributes=attributes)
    return Accepted(span, _traceparent(span))


TraceContext = str | Callable[[], str]


class Joined:
    """A span in a request's stored trace (its traceparent, or a function reading it, called
    only when traces are on), linked to the current span when that is another trace's: a step
    sent by the sweeper, beat or a decision made in another HTTP request."""

    __slots__ = ("_cm", "_outcome", "attributes", "kind", "name", "span", "trace_context")

    def __init__(
        self,
        name: str,
        trace_context: TraceContext,
        attributes: dict[str, Any],
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> None:
        self.name, self.trace_context, self.attributes, self.kind = (
            name,
            trace_context,
            attributes,
            kind,
        )
        self.span: trace.Span = trace.INVALID_SPAN
        self._outcome = ""

    def __enter__(self) -> Joined:
        stored = self.trace_context() if callable(self.trace_context) else self.trace_context
        parent = _parent(stored or "")
        current = trace.get_current_span().get_span_context()
        links = []
        if current.is_valid and (
            parent is None
            or trace.get_current_span(parent).get_span_context().trace_id != current.trace_id
        ):
            links.append(Link(current))
        self._cm = _tracer.start_as_current_span(
            self.name,
            context=parent,
            kind=self.kind,
            attributes=self.attributes,
            links=links,
            record_exception=False,
            set_status_on_exception=False,
        )
        self.span = self._cm.__enter__()
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> Any:
        if exc is not None and not self._outcome:
            self.span.set_attribute("error.type", type(exc).__qualname__)
            self.span.set_status(Status(StatusCode.ERROR))
        return self._cm.__exit__(kind, exc, tb)

    def outcome(self, value: str) -> None:
        """What the span's work came to (``garden.step.outcome``); an exception after this is
        that outcome, not an error (a contended lock, say)."""
        self._outcome = str(value)
        self.span.set_attribute("garden.step.outcome", self._outcome)

    def set(self, attributes: dict[str, Any]) -> None:
        self.span.set_attributes(attributes)


class _Off:
    """What every helper hands back while traces are off: does nothing, costs a call."""

    __slots__ = ()
    traceparent = ""

    def __enter__(self) -> _Off:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def outcome(self, value: str) -> None:
        pass

    def set(self, attributes: dict[str, Any]) -> None:
        pass

    def replied(self, reply: Any) -> Any:
        return reply

    def done(self, outcome: Any) -> Any:
        return outcome


OFF = _Off()


def joined(
    name: str, *, trace_context: TraceContext, attributes: dict[str, Any] | None = None
) -> Joined | _Off:
    """A context manager: ``name`` as a span of the request's stored trace (see Joined)."""
    if not ON:
        return OFF
    return Joined(name, trace_context, attributes or {})


def step_span(
    *,
    request_id: int,
    fence: int,
    group_id: int | None,
    attempt: int,
    tools: bool,
    trace_context: TraceContext,
) -> Joined | _Off:
    """The ``garden.step`` span of one delivery of a step, in its request's trace."""
    if not ON:
        return OFF
    attributes: dict[str, Any] = {
        "garden.request.id": request_id,
        "garden.step.fence": fence,
        "garden.step.attempt": attempt,
    }
    if group_id is not None:
        attributes["garden.group.id"] = group_id
    if tools:
        attributes["garden.step.tools"] = True
    return Joined("garden.step", trace_context, attributes)


def mark(name: str, *, trace_context: TraceContext, attributes: dict[str, Any]) -> None:
    """A span of no length in the request's trace, linked to the current span: what the
    sweeper recovered, the decision on an approval."""
    if not ON:
        return
    with Joined(name, trace_context, attributes):
        pass


def event(name: str, attributes: dict[str, Any] | None = None) -> None:
    """An event on the current span (the step's): a lock taken, an approval asked for."""
    if ON:
        trace.get_current_span().add_event(name, attributes or {})


def annotate(attributes: dict[str, Any]) -> None:
    """Attributes of the current span (the step's: its speaker, its reservation's purpose)."""
    if ON:
        trace.get_current_span().set_attributes(attributes)


def traced(name: str) -> Callable[[_F], _F]:
    """Run the decorated function in a child span ``name`` (claim, projection, …)."""

    def wrap(fn: _F) -> _F:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            if not ON:
                return fn(*args, **kwargs)
            with _tracer.start_as_current_span(name):
                return fn(*args, **kwargs)

        return inner  # type: ignore[return-value]

    return wrap


# --- model and tool calls (the GenAI semantic conventions) -----------------------------------


class _Call:
    """A span around one model call or one tool call, its outcome set by ``replied``/``done``."""

    __slots__ = ("_cm", "span")

    def __init__(self, name: str, kind: SpanKind, attributes: dict[str, Any]) -> None:
        self._cm = _tracer.start_as_current_span(
            name,
            kind=kind,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )

    def __enter__(self) -> _Call:
        self.span = self._cm.__enter__()
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> Any:
        if exc is not None:
            self.span.set_attribute(
                "error.type", getattr(exc, "code", None) or type(exc).__qualname__
            )
            self.span.set_status(Status(StatusCode.ERROR))
        return self._cm.__exit__(kind, exc, tb)

    def replied(self, reply: Any) -> Any:
        """The model's reply: the tokens the provider reported, why it stopped."""
        usage = reply.usage
        self.span.set_attributes(
            {
                "gen_ai.usage.input_tokens": usage.input_tokens,
                "gen_ai.usage.output_tokens": usage.output_tokens,
                "gen_ai.response.finish_reasons": [reply.stop_reason],
            }
        )
        if CAPTURE_CONTENT:
            self.span.set_attribute(
                "gen_ai.output.messages",
                _bounded([{"role": "assistant", "parts": _parts(reply.content)}]),
            )
        return reply

    def done(self, outcome: Any) -> Any:
        """The tool's outcome (a garden.tools.ToolOutcome): ok, or the error's code."""
        self.span.set_attribute("garden.tool.outcome", "error" if outcome.is_error else "ok")
        if outcome.is_error:
            self.span.set_attribute("error.type", outcome.code or "TOOL_ERROR")
            self.span.set_status(Status(StatusCode.ERROR))
        if CAPTURE_CONTENT:
            self.span.set_attribute("gen_ai.tool.call.result", _bounded(outcome.content))
        return outcome


def model_call(
    *, provider: str, model: str, agent: str, purpose: str = "", chat: Any = None
) -> _Call | _Off:
    """The ``chat {model}`` span of one model call; ``replied(reply)`` records its usage. With
    content capture on, ``chat`` (a ChatRequest) is recorded as the input messages."""
    if not ON:
        return OFF
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "gen_ai.agent.name": agent,
    }
    if purpose:
        attributes["garden.reservation.purpose"] = purpose
    if CAPTURE_CONTENT and chat is not None:
        attributes["gen_ai.system_instructions"] = _bounded(chat.system)
        attributes["gen_ai.input.messages"] = _bounded(
            [{"role": m.role, "parts": _parts(m.content)} for m in chat.messages]
        )
    # The name is bounded (an owner names the model; the attribute keeps it whole).
    return _Call(f"chat {model[:80]}", SpanKind.CLIENT, attributes)


def tool_call(*, name: str, call_id: str, arguments: Any = None) -> _Call | _Off:
    """The ``execute_tool {name}`` span of one tool call; ``done(outcome)`` records how it went."""
    if not ON:
        return OFF
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }
    if CAPTURE_CONTENT and arguments is not None:
        attributes["gen_ai.tool.call.arguments"] = _bounded(arguments)
    return _Call(f"execute_tool {name}", SpanKind.INTERNAL, attributes)


def _parts(blocks: Iterable[Any]) -> list[dict[str, Any]]:
    """Message blocks in the GenAI conventions' shape (no picture bytes)."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append({"type": "text", "content": block.text})
        elif kind == "tool_call":
            parts.append(
                {
                    "type": "tool_call",
                    "id": block.id,
                    "name": block.name,
                    "arguments": block.arguments,
                }
            )
        elif kind == "tool_result":
            parts.append(
                {"type": "tool_call_response", "id": block.call_id, "response": block.content}
            )
        else:
            parts.append({"type": str(kind), "title": getattr(block, "title", "")})
    return parts


def _bounded(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    if len(text) > CONTENT_MAX_CHARS:
        return text[:CONTENT_MAX_CHARS] + "…"
    return text
