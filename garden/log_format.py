"""What every log line says besides its message: the process's role, the HTTP request it serves
(its request id, carried into the Celery tasks that request sends), the current span's trace
and span ids, the task being run — and the two formats (GARDEN_LOG_FORMAT): ``text``, one
line of those fields before the message, or ``json``, one JSON object a line
(python-json-logger), a traceback in its ``exc_info`` field.

``ContextFilter`` puts the fields on each record; settings.LOGGING's console handler and
Celery's own handlers (config/celery.py) carry it and the formatter."""

from __future__ import annotations

import contextvars
import logging
import logging.config
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

WEB, WORKER, BEAT, MANAGE = "web", "worker", "beat", "manage"
# What this process is: a command of manage.py until an entry point says otherwise
# (config/asgi.py and config/wsgi.py: web; Celery's worker_init and beat_init: worker, beat).
_role = MANAGE

# The id of the HTTP request being served, or of the one that sent the task being run.
request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "garden_request_id", default=None
)
# The task being run (its id and name), in a worker.
task: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "garden_task", default=None
)

# An id a client may give in X-Request-ID: short, and letters, digits, dot, dash, underscore.
_SANE_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
# The Celery message header that carries the request id to the tasks a request sends.
TASK_HEADER = "garden_request_id"
# The record attributes ContextFilter sets (never copied again as extras of a JSON line).
FIELDS = ("role", "request_id", "trace_id", "span_id", "task_id", "task_name")


def set_role(role: str) -> None:
    global _role
    _role = role


def role() -> str:
    return _role


def sane_request_id(value: str | None) -> str:
    """``value`` when it is a sane request id, else a new one (a uuid4's hex)."""
    if value and _SANE_ID.fullmatch(value):
        return value
    return uuid.uuid4().hex


def context() -> dict[str, Any]:
    """This moment's fields: role, request_id, and trace_id/span_id while a span is current,
    task_id/task_name while a task runs (those absent when there is none)."""
    fields: dict[str, Any] = {"role": _role, "request_id": request_id.get()}
    span = trace.get_current_span().get_span_context()
    if span.is_valid:
        fields["trace_id"] = trace.format_trace_id(span.trace_id)
        fields["span_id"] = trace.format_span_id(span.span_id)
    running = task.get()
    if running is not None:
        fields["task_id"], fields["task_name"] = running
    return fields


class ContextFilter(logging.Filter):
    """A handler's filter: the record gets ``context()``'s fields (it keeps fields it has)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in context().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


def _iso(created: float) -> str:
    return datetime.fromtimestamp(created, tz=UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    """The record's context fields: set by ContextFilter, or read now when it did not run."""
    if hasattr(record, "role"):
        return {key: getattr(record, key) for key in FIELDS if getattr(record, key, None)}
    return {key: value for key, value in context().items() if value}


class TextFormatter(logging.Formatter):
    """``2026-01-02T03:04:05.678Z WARNING garden.x [web request_id=… trace_id=…] message``,
    time in UTC; a traceback follows on its own lines."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(garden_context)s] %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _iso(record.created)

    def format(self, record: logging.LogRecord) -> str:
        fields = _fields(record)
        said = [fields.pop("role", _role)] + [f"{k}={v}" for k, v in fields.items()]
        record.garden_context = " ".join(said)
        return super().format(record)


# Django's request logger adds the request object itself: its str() is the path with the
# query string, which a line must not carry; status_code stays.
_SKIPPED = [*RESERVED_ATTRS, *FIELDS, "garden_context", "request", "color_message"]


class JsonFormatter(_JsonFormatter):
    """One JSON object a line: time (ISO 8601, UTC), level, logger, message, then the context
    fields, a record's extras, and ``exc_info`` (the traceback, one string)."""

    def __init__(self) -> None:
        super().__init__(reserved_attrs=_SKIPPED, json_ensure_ascii=False)

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        log_data["time"] = _iso(record.created)
        log_data["level"] = record.levelname
        log_data["logger"] = record.name
        log_data["message"] = record.message
        log_data.update(_fields(record))
        super().add_fields(log_data, record, message_dict)


FORMATTERS = {"text": TextFormatter, "json": JsonFormatter}


def formatter(name: str) -> logging.Formatter:
    """The formatter GARDEN_LOG_FORMAT names (``text`` or ``json``)."""
    return FORMATTERS[name]()


def configure(config: dict[str, Any]) -> None:
    """settings.LOGGING_CONFIG: ``config`` (settings.LOGGING), then warnings are logged (on the
    ``py.warnings`` logger) instead of printed: a Celery worker's start-up warnings come before
    Celery sets its own logging up."""
    logging.config.dictConfig(config)
    logging.captureWarnings(True)
    _fields_on_every_record()


def _fields_on_every_record() -> None:
    """Every record gets ``context()``'s fields as it is made, whichever handlers it meets:
    Celery replaces the root's handlers (and with them the console's ContextFilter), and a
    record read by another handler (Sentry's, a test's) must say its request too."""
    make = logging.getLogRecordFactory()
    if getattr(make, "garden_context", False):
        return

    def record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        made = make(*args, **kwargs)
        for key, value in context().items():
            setattr(made, key, value)
        return made

    record.garden_context = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(record)
