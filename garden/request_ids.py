"""Every HTTP request has an id: the client's ``X-Request-ID`` when it is sane (at most 128 of
letters, digits, ``.``, ``_``, ``-``), else a new one. It is on every response (probes, 404s,
500s and the API's errors too: the middleware is outside all of them), on every log line
written while the request is served (garden/log_format.py), on the request's span while traces
are on, and in the Celery tasks the request sends, whose worker's lines carry it too. One
access line per request on ``garden.access`` (GARDEN_ACCESS_LOG): method, path without its
query string, status, milliseconds, request id, user id — never a query string or a body."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.functional import empty

from garden import log_format, telemetry

access = logging.getLogger("garden.access")

HEADER = "X-Request-ID"


def _user_id(request: HttpRequest) -> int | None:
    """The signed-in user's id, when the request has already read who it is (an access token's
    or a session's user): reading it here would cost a session and a user query."""
    user = request.__dict__.get("user")
    wrapped = getattr(user, "_wrapped", user)
    if wrapped is None or wrapped is empty or not getattr(wrapped, "is_authenticated", False):
        return None
    return wrapped.pk


class RequestIdMiddleware:
    """Sync, second in MIDDLEWARE (inside DbReleaseMiddleware, outside the probes)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        rid = log_format.sane_request_id(request.headers.get(HEADER))
        request.request_id = rid
        token = log_format.request_id.set(rid)
        started = time.monotonic()
        try:
            telemetry.annotate({"garden.http.request_id": rid})
            response = self.get_response(request)
            response[HEADER] = rid
            if settings.GARDEN_ACCESS_LOG:
                self._log(request, response, started)
            return response
        finally:
            log_format.request_id.reset(token)

    @staticmethod
    def _log(request: HttpRequest, response: HttpResponse, started: float) -> None:
        ms = round((time.monotonic() - started) * 1000, 1)
        user = _user_id(request)
        access.info(
            "%s %s %s %.1f ms",
            request.method,
            request.path,
            response.status_code,
            ms,
            extra={
                "method": request.method,
                "path": request.path,
                "status": response.status_code,
                "duration_ms": ms,
                "user_id": user,
            },
        )


class WebsocketRequestIds:
    """ASGI, outermost on the websocket route (config/asgi.py): a socket gets a request id as
    an HTTP request does (its handshake's ``X-Request-ID`` when sane, said back on the accept),
    every line written for it carries it, and ``garden.access`` says when it is accepted and,
    at its end, its status (101 accepted, 403 refused before), close code and duration."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        asked = dict(scope.get("headers") or ()).get(b"x-request-id", b"")
        rid = log_format.sane_request_id(asked.decode("latin-1"))
        token = log_format.request_id.set(rid)
        started = time.monotonic()
        path = scope.get("path", "")
        state: dict[str, Any] = {"status": 403, "code": None}

        async def receiving() -> dict[str, Any]:
            message = await receive()
            if message["type"] == "websocket.disconnect" and state["code"] is None:
                state["code"] = message.get("code", 1000)
            return message

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "websocket.accept":
                headers = [*message.get("headers", ()), (b"x-request-id", rid.encode())]
                message = {**message, "headers": headers}
                state["status"] = 101
                if settings.GARDEN_ACCESS_LOG:
                    access.info(
                        "WS %s accepted", path, extra={"method": "WS", "path": path, "status": 101}
                    )
            elif message["type"] == "websocket.close" and state["code"] is None:
                state["code"] = message.get("code", 1000)
            await send(message)

        try:
            await self.app(scope, receiving, sending)
        finally:
            if settings.GARDEN_ACCESS_LOG:
                ms = round((time.monotonic() - started) * 1000, 1)
                access.info(
                    "WS %s %s closed %s %.1f ms",
                    path,
                    state["status"],
                    state["code"],
                    ms,
                    extra={
                        "method": "WS",
                        "path": path,
                        "status": state["status"],
                        "close_code": state["code"],
                        "duration_ms": ms,
                    },
                )
            log_format.request_id.reset(token)


# --- Celery: the request id travels with the tasks a request sends --------------------------


def task_published(headers: dict[str, Any] | None) -> None:
    """before_task_publish: the current request id goes into the message's headers."""
    rid = log_format.request_id.get()
    if rid and headers is not None and log_format.TASK_HEADER not in headers:
        headers[log_format.TASK_HEADER] = rid


def task_started(task: Any, task_id: str) -> None:
    """task_prerun: the sender's request id (if any) and the task are this thread's context."""
    request = getattr(task, "request", None)
    rid = request.get(log_format.TASK_HEADER) if request is not None else None
    log_format.request_id.set(rid if isinstance(rid, str) else None)
    log_format.task.set((task_id, getattr(task, "name", "")))


def task_ended() -> None:
    """task_postrun: the thread serves no request and runs no task any more."""
    log_format.request_id.set(None)
    log_format.task.set(None)
