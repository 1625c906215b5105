"""How the API knows who is asking: a browser's session, with its CSRF pair, or a personal
access token (``Authorization: Bearer gdn_…``).

Session first: a browser's session wins, with its CSRF check — made on the X-CSRFToken header
and the cookie alone, before any of the body is read, so a write without the header is
refused (403 CSRF_FAILED) however large its body. A request carrying only a token has no
session, so no CSRF pair is needed — the token is not something a browser sends by itself. A
token that is wrong, revoked or expired is a named 401, never an anonymous request.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, QueryDict
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions, status
from rest_framework.authentication import CSRFCheck
from rest_framework.request import Request

from garden.errors import scope_message
from garden.services.tokens import token_authenticate

_MESSAGES = {
    "TOKEN_INVALID": "The access token is not valid.",
    "TOKEN_REVOKED": "The access token has been revoked.",
    "TOKEN_EXPIRED": "The access token has expired.",
}


class _WithoutBody:
    """The request as the CSRF check sees it: headers and cookies, never the body. Django's
    check looks for the token in a POST's form fields first, which would parse the whole
    body (files and all) before the token is compared; the API takes it from the header."""

    POST = QueryDict()

    def __init__(self, request: HttpRequest) -> None:
        self._request = request

    def __getattr__(self, name: str) -> Any:
        return getattr(self._request, name)


class SessionAuthentication(authentication.SessionAuthentication):
    """DRF's session authentication with the CSRF check made before the body is read."""

    def enforce_csrf(self, request: Request) -> None:
        check = CSRFCheck(lambda request: None)
        seen = _WithoutBody(request._request)
        check.process_request(seen)  # reads the cookie into META["CSRF_COOKIE"]
        reason = check.process_view(seen, None, (), {})
        if reason:
            raise CsrfRefused(f"CSRF Failed: {reason}")


class CsrfRefused(exceptions.PermissionDenied):
    # Not garden.api.errors.ApiError: DRF imports this module while its views are loading.
    def __init__(self, message: str) -> None:
        super().__init__(detail=message, code="CSRF_FAILED")


class TokenRefused(exceptions.APIException):
    status_code = status.HTTP_401_UNAUTHORIZED

    def __init__(self, code: str) -> None:
        super().__init__(detail=_MESSAGES[code], code=code)


class AccessTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise TokenRefused("TOKEN_INVALID")
        try:
            secret = header[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise TokenRefused("TOKEN_INVALID") from exc
        token, problem = token_authenticate(secret)
        if token is None:
            raise TokenRefused(problem)
        return token.owner, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class TokenScopes(permissions.BasePermission):
    """A request made with an access token does only what the token's scopes allow: reads
    need ``read``, a DELETE ``manage`` (what it removes cannot be taken back), other writes
    ``write``, and a view's ``token_scopes`` (by method) name the others — ``manage`` for a
    group's clear, restore and archive and for deciding an approval. A session is not limited here (it has the CSRF
    pair instead)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        needed = getattr(view, "token_scopes", {}).get(request.method) or _needed(request.method)
        if not has_scope(request, needed):
            raise ScopeRefused(needed)
        return True


def _needed(method: str) -> str:
    if method in permissions.SAFE_METHODS:
        return "read"
    return "manage" if method == "DELETE" else "write"


def has_scope(request: Request, scope: str) -> bool:
    """Whether the request may do what ``scope`` covers: a session always; a token when it was
    made with it. Passed to a service whose change needs ``manage`` only for some values (an
    approval rule, a stored key), which it can tell only once it sees what would change."""
    from garden.models import AccessToken

    token = request.auth
    return not isinstance(token, AccessToken) or scope in (token.scopes or [])


class ScopeRefused(exceptions.PermissionDenied):
    def __init__(self, scope: str) -> None:
        super().__init__(detail=scope_message(scope), code="TOKEN_SCOPE")


class SessionOnly(permissions.BasePermission):
    """Tokens are made and revoked by a signed-in person: a leaked token cannot make more or
    revoke its owner's others. Checked in place of the scopes, so a token of any scope is
    told why."""

    def has_permission(self, request: Request, view: Any) -> bool:
        from garden.models import AccessToken

        if isinstance(request.auth, AccessToken):
            raise TokensNeedSession()
        return True


class TokensNeedSession(exceptions.PermissionDenied):
    def __init__(self) -> None:
        super().__init__(
            detail="Access tokens are managed from a signed-in session, not with a token.",
            code="TOKEN_CANNOT_MANAGE_TOKENS",
        )


class SessionScheme(OpenApiAuthenticationExtension):
    """The session as the OpenAPI schema describes it: Django's session cookie."""

    target_class = "garden.api.auth.SessionAuthentication"
    name = "sessionCookie"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME}


class AccessTokenScheme(OpenApiAuthenticationExtension):
    """The token as the OpenAPI schema describes it: HTTP bearer."""

    target_class = "garden.api.auth.AccessTokenAuthentication"
    name = "accessToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal access token (gdn_…), made on the Access tokens page.",
        }
