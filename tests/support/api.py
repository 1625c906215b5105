"""Signed-in API clients and the one assertion of a refusal in the API's error shape."""

from __future__ import annotations

from typing import Any


def sign_in(user: Any) -> Any:
    """An API client signed in as ``user`` that enforces CSRF like a browser session (a
    ``CsrfClient``: it sends the CSRF pair on every write)."""
    from rest_framework.test import APIClient

    from tests.conftest import CsrfClient

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    return CsrfClient(client)


def assert_refused(
    response: Any, status: int, code: str | None = None, *, field: str | None = None
) -> dict[str, Any]:
    """``response`` is the API's refusal: ``status``, a named ``code`` and a message; with
    ``field``, the errors list names that field (with ``code`` when ``code`` is given, else
    any code). Returns the body for anything further to check."""
    assert response.status_code == status, (response.status_code, response.content)
    body = response.json()
    assert body["code"] and body["message"], body
    if field is None:
        assert code is None or body["code"] == code, body
    else:
        pairs = {(e["field"], e["code"]) for e in body["errors"]}
        assert any(f == field and (code is None or c == code) for f, c in pairs), body
    return body
