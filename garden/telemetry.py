"""Traces (OpenTelemetry): one trace per group request, from the web process that accepted the
message through every worker that stepped it, exported over OTLP/HTTP when the operator sets
the standard ``OTEL_*`` variables (garden/telemetry_setup.py) — and, when not, nothing: every
helper here is a flag check.

The request's trace is stored on its row (``GroupRequest.trace_context``, a W3C traceparent),
so a step sent by the sweeper, a retry or an approval decision joins it too; the context that
sent it, when it belongs to another trace, is a link. Message text, tool arguments and results
stay out of spans (garden/telemetry_genai.py) unless
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is true.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from garden import telemetry_genai
from garden.telemetry_setup import capture_content, configured, start_sdk

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


def setup_tracing(service_name: str) -> bool:
    """Turn traces on for this process when ``configured()``: the SDK's tracer provider with a
    batching OTLP/HTTP exporter (the operator's collector, not garden's egress policy), and the
    Django and Celery instrumentation (and psycopg's, ``telemetry_setup.instrumentations``). ``service_name`` unless OTEL_SERVICE_NAME
    (or service.name in OTEL_RESOURCE_ATTRIBUTES) names it. Once per process; True when on."""
    global ON, CAPTURE_CONTENT, _tracer
    with _setup_lock:
        if ON or not configured():
            return ON
        try:
            _tracer = start_sdk(service_name, web=service_name == SERVICE_WEB)
        except Exception:  # a collector setting that cannot be used must not stop the process
            log.exception("traces stay off: the OpenTelemetry SDK could not be set up")
            return False
        CAPTURE_CONTENT = capture_content()
        ON = True
    return True


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


def _content() -> int:
    """The most characters of a content attribute, 0 while content stays out of spans."""
    return CONTENT_MAX_CHARS if CAPTURE_CONTENT else 0


def model_call(
    *, provider: str, model: str, agent: str, purpose: str = "", chat: Any = None
) -> telemetry_genai.Call | _Off:
    """The ``chat {model}`` span of one model call; ``replied(reply)`` records its usage. With
    content capture on, ``chat`` (a ChatRequest) is recorded as the input messages."""
    if not ON:
        return OFF
    return telemetry_genai.model_call(
        _tracer,
        content=_content(),
        provider=provider,
        model=model,
        agent=agent,
        purpose=purpose,
        chat=chat,
    )


def tool_call(*, name: str, call_id: str, arguments: Any = None) -> telemetry_genai.Call | _Off:
    """The ``execute_tool {name}`` span of one tool call; ``done(outcome)`` records how it went."""
    if not ON:
        return OFF
    return telemetry_genai.tool_call(
        _tracer, content=_content(), name=name, call_id=call_id, arguments=arguments
    )
