"""Bearer authentication with a personal access token (``Authorization: Bearer gdn_…``).

Listed after session authentication: a browser's session wins, with its CSRF check; a
request carrying only a token has no session, so no CSRF pair is needed — the token is not
something a browser sends by itself. A token that is wrong, revoked or expired is a named
401, never an anonymous request.
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, status
from rest_framework.request import Request

from garden.services.tokens import token_authenticate

_MESSAGES = {
    "TOKEN_INVALID": "The access token is not valid.",
    "TOKEN_REVOKED": "The access token has been revoked.",
    "TOKEN_EXPIRED": "The access token has expired.",
}


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
