"""Errors to Sentry when the operator sets SENTRY_DSN (config/settings.py calls ``start``), with
Django's and Celery's integrations — and, as with traces (garden/telemetry.py), nothing an
owner wrote: ``scrub`` leaves an event its exception types, stack frames (no local variables),
the logger, the request's method and path, the task's name and the request id. Every message
and exception text, request body, query string, cookie and header but a few harmless ones,
extra, user and breadcrumb text is taken out, and any value whose key names a secret or that
looks like a key or token is blanked. Without SENTRY_DSN the SDK is never imported."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from garden import log_format

FILTERED = "[Filtered]"

# Keys whose value is never sent, wherever they are in an event.
_SECRET_KEY = re.compile(
    r"(pass(word|wd)?|secret|token|key|auth|cookie|session|csrf|signature|dsn|credential"
    r"|bearer|private)",
    re.IGNORECASE,
)
# Values that look like a key or token, wherever they are: garden's access tokens (gdn_), the
# providers' keys (sk-…, sk-ant-…, AIza…), an Authorization value.
_SECRET_VALUE = re.compile(r"(gdn_[\w-]+|sk-[\w-]{8,}|AIza[\w-]{20,}|(?i:bearer|basic)\s+\S+)")
# The request headers an event keeps.
_HEADERS = {"content-type", "content-length", "user-agent", "x-request-id"}
# The breadcrumb fields kept (its message and data are text of what happened).
_CRUMB = ("type", "category", "level", "timestamp")


def _frames(stacktrace: Any) -> None:
    for frame in (stacktrace or {}).get("frames") or ():
        frame.pop("vars", None)


def _walk(value: Any) -> Any:
    """``value`` with every secret-named key's value and every secret-looking string blanked."""
    if isinstance(value, dict):
        return {
            k: FILTERED if isinstance(k, str) and _SECRET_KEY.search(k) else _walk(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_walk(v) for v in value]
    if isinstance(value, str):
        return _SECRET_VALUE.sub(FILTERED, value)
    return value


def _request(request: dict[str, Any]) -> dict[str, Any]:
    kept: dict[str, Any] = {"method": request.get("method")}
    url = request.get("url")
    if isinstance(url, str):
        parts = urlsplit(url)
        kept["url"] = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    headers = request.get("headers") or {}
    kept["headers"] = {k: v for k, v in headers.items() if k.lower() in _HEADERS}
    return kept


def _values(section: Any) -> Iterable[dict[str, Any]]:
    if isinstance(section, dict):
        return section.get("values") or ()
    return section or ()


def scrub(event: dict[str, Any], hint: Any = None) -> dict[str, Any]:
    """Sentry's before_send: the event as the module docstring says it leaves."""
    # _meta annotates what the SDK cut from the event as it was: it is not the event any more.
    for gone in ("message", "user", "_meta"):
        event.pop(gone, None)
    if "logentry" in event:
        event["logentry"] = {"message": FILTERED}
    for exception in _values(event.get("exception")):
        if exception.get("value"):
            exception["value"] = FILTERED
        _frames(exception.get("stacktrace"))
    for thread in _values(event.get("threads")):
        _frames(thread.get("stacktrace"))
    if isinstance(event.get("request"), dict):
        event["request"] = _request(event["request"])
    job = (event.get("extra") or {}).get("celery-job") or {}
    event["extra"] = {"celery-job": {"task_name": job["task_name"]}} if "task_name" in job else {}
    crumbs = event.get("breadcrumbs")
    if crumbs:
        kept = [{k: c[k] for k in _CRUMB if k in c} for c in _values(crumbs)]
        event["breadcrumbs"] = {"values": kept}
    tags = event.setdefault("tags", {})
    tags["garden.role"] = log_format.role()
    rid = log_format.request_id.get()
    if rid:
        tags["request_id"] = rid
    return _walk(event)


def scrub_breadcrumb(crumb: dict[str, Any], hint: Any = None) -> dict[str, Any]:
    """Sentry's before_breadcrumb: only what kind of thing happened, and when."""
    return {k: crumb[k] for k in _CRUMB if k in crumb}


def start(*, dsn: str, environment: str, release: str) -> None:
    """The SDK with the Django and Celery integrations (and its defaults: logged errors become
    events), no tracing or profiling (traces are OpenTelemetry's), no PII, no local variables,
    no request bodies, no integration the SDK would turn on by itself (model and MCP clients'
    would record prompts and tool arguments), and no header added to outgoing requests."""
    import sentry_sdk
    from sentry_sdk.integrations.celery import CeleryIntegration
    from sentry_sdk.integrations.django import DjangoIntegration

    sentry_sdk.init(
        dsn=dsn,
        environment=environment or None,
        release=release or None,
        integrations=[DjangoIntegration(), CeleryIntegration()],
        auto_enabling_integrations=False,
        send_default_pii=False,
        include_local_variables=False,
        max_request_body_size="never",
        traces_sample_rate=None,
        trace_propagation_targets=[],
        before_send=scrub,
        before_breadcrumb=scrub_breadcrumb,
    )
