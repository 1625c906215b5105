"""The service error: a named refusal (code, message, field, HTTP status) that the API maps to
its error shape in one place (garden/api/errors.py)."""

from __future__ import annotations


class ServiceError(Exception):
    """A refusal a person can act on. Nothing was written when a service raises it."""

    def __init__(
        self, code: str, message: str, *, field: str | None = None, status: int = 400
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.status = status


class QuotaExceeded(ServiceError):
    """An owner is at one of the operator's limits; the message names the limit."""

    def __init__(
        self, code: str, message: str, *, field: str | None = None, status: int = 409
    ) -> None:
        super().__init__(code, message, field=field, status=status)
