"""A Redis or broker that is away for a moment (a restart, a failover) answers 503 in garden's
error shape, never Django's HTML error page: the API's views through the API's exception
handler (garden/api/errors.py), every other view through ``UnavailableMiddleware``. Nothing was
written by the refused request; ``Retry-After`` says when to try again."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from kombu.exceptions import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

# What a request meets while Redis or the broker restarts, fails over or is out of reach.
SERVICE_AWAY = (RedisConnectionError, RedisTimeoutError, OperationalError)
RETRY_AFTER_SECONDS = 5
CODE = "unavailable"
MESSAGE = "garden cannot reach a service it needs (Redis); nothing was changed. Try again shortly."


def body() -> dict[str, Any]:
    return {"code": CODE, "message": MESSAGE, "errors": []}


def response() -> HttpResponse:
    answer = JsonResponse(body(), status=503)
    answer["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return answer


class UnavailableMiddleware:
    """Turns a view's SERVICE_AWAY into the 503 above (the API's views never get here: their
    handler answers first)."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, SERVICE_AWAY):
            return response()
        return None
