"""The websocket's origin check, in every mode: a browser page may open a room's socket only
from the site itself (the Origin's host and port are the request's own Host) or from an
origin the operator trusts (DJANGO_CSRF_TRUSTED_ORIGINS). Channels' AllowedHostsOriginValidator
alone lets any origin in while ALLOWED_HOSTS is ``*`` (development), so another site open in
the same browser could read a room over the owner's session cookie."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin1")
    return None


def origin_allowed(scope: dict[str, Any]) -> bool:
    origin = _header(scope, b"origin")
    if origin is None:
        # Not a browser (browsers always send Origin on a websocket); it holds the owner's
        # own session, so cross-site hijacking is not possible.
        return True
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    parsed = urlsplit(origin)
    host = _header(scope, b"host")
    return bool(host and parsed.netloc and parsed.netloc.lower() == host.lower())


class SameOriginValidator:
    """ASGI middleware: refuse a websocket whose Origin is another site."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            denier = WebsocketDenier()
            return await denier(scope, receive, send)
        return await self.application(scope, receive, send)
