"""Turning traces on in a process (garden/telemetry.py ``setup_tracing``): whether the operator
asked for them with the standard ``OTEL_*`` variables, which instrumentations run, and the
OpenTelemetry SDK with its batching OTLP/HTTP exporter. The SDK and the instrumentation are
imported only when traces are turned on."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagate import set_global_textmap
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator


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


def capture_content(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether messages, tool arguments and results go on spans
    (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT)."""
    return _true(environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"))


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


def start_sdk(service_name: str, *, web: bool) -> trace.Tracer:
    """The SDK's tracer provider, its exporter and the instrumentations, set up for this process;
    ``web``: a process that takes HTTP requests from clients, whose trace context it ignores."""
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
    if web:
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
