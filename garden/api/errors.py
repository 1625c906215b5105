"""One error shape for every API failure: ``{"code", "message", "errors": [{field, code, message}]}``."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from garden.errors import ServiceError


class ApiError(exceptions.APIException):
    """A named refusal raised by a view: HTTP status, a code, and the field it concerns."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        status_code: int = status.HTTP_400_BAD_REQUEST,
    ) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.code = code
        self.field = field


def _flatten(details: Any, prefix: str = "") -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    if isinstance(details, dict) and {"message", "code"} <= set(details):
        return [
            {
                "field": prefix or "non_field_errors",
                "code": str(details["code"]),
                "message": str(details["message"]),
            }
        ]
    if isinstance(details, dict):
        for key, value in details.items():
            out += _flatten(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(details, list):
        for i, value in enumerate(details):
            nested = isinstance(value, dict) and not ({"message", "code"} <= set(value))
            out += _flatten(value, f"{prefix}[{i}]" if nested else prefix)
    return out


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ServiceError):
        return Response(
            {
                "code": exc.code,
                "message": exc.message,
                "errors": [
                    {"field": e.field, "code": e.code, "message": e.message} for e in exc.errors
                ],
            },
            status=exc.status,
        )
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ApiError):
        body = {
            "code": exc.code,
            "message": str(exc.detail),
            "errors": [
                {
                    "field": exc.field or "non_field_errors",
                    "code": exc.code,
                    "message": str(exc.detail),
                }
            ],
        }
    elif isinstance(exc, exceptions.ValidationError):
        errors = _flatten(exc.get_full_details())
        body = {"code": "invalid", "message": "The request is invalid.", "errors": errors}
    else:
        detail = getattr(exc, "detail", str(exc))
        code = exc.get_codes() if isinstance(exc, exceptions.APIException) else "error"
        body = {
            "code": code if isinstance(code, str) else "error",
            "message": str(detail),
            "errors": [],
        }
    response.data = body
    return response
