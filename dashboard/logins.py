"""Signing in on a shared site: the client address the login lockout (django-axes) counts by,
and the page a locked-out sign-in gets."""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.shortcuts import render


def client_ip(request: HttpRequest) -> str | None:
    """The address a failed sign-in is counted against. Behind the TLS proxy
    (GARDEN_BEHIND_PROXY) every request comes from the proxy, so the address is the one the
    proxy appended last to X-Forwarded-For (what it saw); a client can prepend anything to
    that header, never append. Otherwise the connection's own address."""
    if settings.GARDEN_BEHIND_PROXY:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        last = forwarded.rsplit(",", 1)[-1].strip()
        try:
            return str(ipaddress.ip_address(last))
        except ValueError:
            pass  # no address, or not one: count by the connection's
    return request.META.get("REMOTE_ADDR") or None


def lockout_response(request: HttpRequest, original_response=None, credentials=None):
    """What a locked-out sign-in answers (429 LOGIN_LOCKED): the API's error shape on /api/
    (a token's password check), the lockout page elsewhere."""
    limit = settings.AXES_FAILURE_LIMIT
    cool_off = settings.AXES_COOLOFF_TIME
    message = (
        f"Too many wrong passwords ({limit}): signing in is locked for {cool_off} after the "
        "last attempt, even with the right password."
    )
    if request.path.startswith("/api/"):
        return JsonResponse(
            {
                "code": "LOGIN_LOCKED",
                "message": message,
                "errors": [{"field": "password", "code": "LOGIN_LOCKED", "message": message}],
            },
            status=429,
        )
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    return render(
        request,
        "dashboard/login_locked.html",
        {"failure_limit": limit, "cooloff_timedelta": cool_off, "username": username[:150]},
        status=429,
    )
