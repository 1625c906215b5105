"""One error shape for every API failure: ``{"code", "message", "errors": [{field, code, message}]}``,
mapped here from the one error type views and services raise (``garden.errors.ServiceError``),
and the OpenAPI responses that document it, shared by every app's views."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from garden import unavailable
from garden.errors import ServiceError


class ErrorItemOutput(serializers.Serializer):
    field = serializers.CharField()
    code = serializers.CharField()
    message = serializers.CharField()


class ErrorOutput(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    errors = ErrorItemOutput(many=True)


# The refusals every owner-scoped route documents, described once.
INVALID = OpenApiResponse(
    ErrorOutput, description="Invalid: every broken rule, with field and code."
)
FORBIDDEN = OpenApiResponse(ErrorOutput, description="Not signed in, or the CSRF pair is missing.")


def not_found_response(what: str) -> OpenApiResponse:
    """The documented 404 of a route whose ``what`` belongs to its owner alone."""
    return OpenApiResponse(ErrorOutput, description=f"NOT_FOUND: no such {what} for this owner.")


# A route's 400, 403 and 404 in one: ``responses={200: Output, **REFUSED}``.
REFUSED = {400: ErrorOutput, 403: ErrorOutput, 404: ErrorOutput}


class ApiError(exceptions.APIException):
    """A named refusal raised where only DRF's own exception type may be: a body parser, which
    runs inside DRF's authentication (the session's CSRF check). Everywhere else, views and
    services alike raise ``ServiceError``."""

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
        set_rollback()
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
    if isinstance(exc, unavailable.SERVICE_AWAY):
        set_rollback()
        return Response(
            unavailable.body(),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(unavailable.RETRY_AFTER_SECONDS)},
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
