"""The service error: a named refusal (code, message, field, HTTP status) that the API maps to
its error shape in one place (garden/api/errors.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """One broken rule of a refusal that names several (a group's rule set, say)."""

    field: str
    code: str
    message: str


class ServiceError(Exception):
    """A refusal a person can act on. Nothing was written when a service raises it.

    ``errors`` lists every broken rule when there are several; by default the refusal is its
    own single error on ``field``.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        status: int = 400,
        errors: Sequence[FieldError] = (),
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.status = status
        self.errors = tuple(errors) or (FieldError(field or "non_field_errors", code, message),)


def scope_message(scope: str) -> str:
    """What a person is told when an access token lacks ``scope`` for what it asked."""
    return (
        f"This access token may not do this: it needs the '{scope}' scope. Make one with it on "
        "the Access tokens page, or do it from the dashboard."
    )


def scope_refused(scope: str) -> ServiceError:
    """The refusal (403 TOKEN_SCOPE) of a change only some tokens may make, found by a service
    once it sees what the change would do — the same refusal as a route's own scope check."""
    return ServiceError("TOKEN_SCOPE", scope_message(scope), status=403)


def not_found(what: str, *, field: str | None = None) -> ServiceError:
    """The one 404: ``NOT_FOUND``, "No such <what>." — another owner's row reads the same."""
    return ServiceError("NOT_FOUND", f"No such {what}.", field=field, status=404)


class QuotaExceeded(ServiceError):
    """An owner is at one of the operator's limits; the message names the limit."""

    def __init__(
        self, code: str, message: str, *, field: str | None = None, status: int = 409
    ) -> None:
        super().__init__(code, message, field=field, status=status)


# The largest primary key a table here can hold: a larger number names no row.
MAX_ID = 2**63 - 1


def is_row_id(value: object) -> bool:
    """True for an int that could be a primary key (never a bool, never out of range)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_ID
