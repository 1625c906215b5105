"""Signing in on a shared site: the client address the login lockout (django-axes) counts by,
the per-username slow-down, the device cookie that lets a known browser past both, and the
page a locked-out or slowed sign-in gets.

django-axes locks a username *at one address* (the pair). Across addresses a username is only
slowed: after GARDEN_LOGIN_SLOWDOWN_AFTER failures within the window, each sign-in for it
waits (429 LOGIN_SLOWED, Retry-After) a time that doubles with each further failure up to
GARDEN_LOGIN_SLOWDOWN_MAX_SECONDS; a slowed attempt is answered before any password check,
so it counts nowhere. A browser that signed in as a person holds a signed device cookie for
them (OWASP "device cookies"); it is exempt from the slow-down and the pair lock for that
person until GARDEN_LOGIN_FAILURE_LIMIT failures were made with it."""

from __future__ import annotations

import hashlib
import math
import secrets
import time

from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core import signing
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from garden.attempts import client_address, count_failure

DEVICE_COOKIE = "garden_device"
_DEVICE_SALT = "garden.logins.device"
# The sign-in forms the slow-down stands in front of (the token password check is made by a
# signed-in session; the pair lock covers it).
_SIGN_IN_PATHS = ("/dashboard/login/", "/admin/login/")


def client_ip(request: HttpRequest) -> str | None:
    """The address a failed sign-in is counted against (garden.attempts.client_address: the
    one the TLS proxy saw behind it, else the connection's own)."""
    return client_address(request.META)


def _refusal(request: HttpRequest, code: str, message: str, username: str) -> HttpResponse:
    """429 with the API's error shape for /api/ and JSON clients, garden's own page (the
    dashboard's sign-in look, never the admin's title) for browsers."""
    accept = request.headers.get("Accept", "")
    if request.path.startswith("/api/") or (
        "application/json" in accept and "text/html" not in accept
    ):
        return JsonResponse(
            {
                "code": code,
                "message": message,
                "errors": [{"field": "password", "code": code, "message": message}],
            },
            status=429,
        )
    context = {
        "site_header": "garden",
        "site_title": "garden",
        "site_url": None,
        "title": "Signing in is held",
        "code": code,
        "message": message,
        "username": username[:150],
    }
    return render(request, "dashboard/login_locked.html", context, status=429)


def lockout_response(request: HttpRequest, original_response=None, credentials=None):
    """What a locked-out sign-in answers (429 LOGIN_LOCKED): this username at this address
    failed GARDEN_LOGIN_FAILURE_LIMIT times."""
    limit = settings.AXES_FAILURE_LIMIT
    cool_off = settings.AXES_COOLOFF_TIME
    message = (
        f"Too many wrong passwords ({limit}) for this username from this address: signing in "
        f"here is locked for {cool_off} after the last attempt, even with the right password. "
        "Other addresses, and a browser that signed in as this person before, are not locked; "
        "staff can lift the lock (Access attempts, or manage.py axes_reset_username)."
    )
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    return _refusal(request, "LOGIN_LOCKED", message, username)


# --- the per-username slow-down ---------------------------------------------------------


def _username_digest(username: str) -> str:
    return hashlib.sha256(username.casefold().encode()).hexdigest()[:32]


def failures_key(username: str) -> str:
    return f"logins:fails:{_username_digest(username)}"


def last_failure_key(username: str) -> str:
    return f"logins:last:{_username_digest(username)}"


def _window_seconds() -> int:
    return max(1, settings.GARDEN_LOGIN_SLOWDOWN_WINDOW_MINUTES * 60)


def _count_up(key: str) -> int:
    return count_failure(key, window_seconds=_window_seconds())


def slowed_for(username: str) -> int:
    """Whole seconds a sign-in for username must still wait (0: none). After
    GARDEN_LOGIN_SLOWDOWN_AFTER failures within the window the wait after the last failure is
    GARDEN_LOGIN_SLOWDOWN_SECONDS, doubling with each further failure, at most
    GARDEN_LOGIN_SLOWDOWN_MAX_SECONDS."""
    after = settings.GARDEN_LOGIN_SLOWDOWN_AFTER
    if after <= 0 or not username:
        return 0
    failures = cache.get(failures_key(username)) or 0
    last = cache.get(last_failure_key(username))
    if failures < after or last is None:
        return 0
    cap = settings.GARDEN_LOGIN_SLOWDOWN_MAX_SECONDS
    wait = min(cap, settings.GARDEN_LOGIN_SLOWDOWN_SECONDS * 2 ** min(failures - after, 32))
    return max(0, math.ceil(last + wait - time.time()))


def slowed_response(request: HttpRequest, username: str, seconds: int) -> HttpResponse:
    message = (
        f"Many wrong passwords for this username lately: try again in {seconds} seconds. "
        "Nothing is locked; a browser that signed in as this person before is not held up."
    )
    response = _refusal(request, "LOGIN_SLOWED", message, username)
    response["Retry-After"] = str(seconds)
    return response


# --- the device cookie ------------------------------------------------------------------


def _device_id(request: HttpRequest, username: str) -> str | None:
    """The id of the valid device cookie request presents for username, else None."""
    value = request.COOKIES.get(DEVICE_COOKIE)
    if not value or not username or settings.GARDEN_LOGIN_DEVICE_DAYS <= 0:
        return None
    try:
        data = signing.loads(
            value, salt=_DEVICE_SALT, max_age=settings.GARDEN_LOGIN_DEVICE_DAYS * 86400
        )
    except signing.BadSignature:  # forged, for another site, or expired
        return None
    if not isinstance(data, dict) or data.get("u") != username.casefold():
        return None
    device = data.get("d")
    return device if isinstance(device, str) else None


def known_device(request: HttpRequest, credentials: dict | None = None) -> bool:
    """The sign-in comes from a browser that signed in as this person before and has made
    fewer than GARDEN_LOGIN_FAILURE_LIMIT failures since (AXES_WHITELIST_CALLABLE: such a
    sign-in is neither locked nor counted by django-axes)."""
    username = (credentials or {}).get("username") or ""
    device = _device_id(request, username)
    if device is None:
        return False
    return (cache.get(f"logins:device:{device}") or 0) < settings.AXES_FAILURE_LIMIT


def _failed(sender, credentials: dict, request: HttpRequest | None = None, **kwargs) -> None:
    username = (credentials or {}).get("username") or ""
    if request is None or not username:
        return
    # django-axes' receiver ran first (its app is installed before this one): past the limit
    # the pair was already locked, so no password was checked and nothing is counted here.
    if (getattr(request, "axes_failures_since_start", 0) or 0) > settings.AXES_FAILURE_LIMIT:
        return
    device = _device_id(request, username)
    if device is not None:
        _count_up(f"logins:device:{device}")
    _count_up(failures_key(username))
    cache.set(last_failure_key(username), time.time(), _window_seconds())


def _signed_in(sender, request: HttpRequest | None = None, user=None, **kwargs) -> None:
    if request is not None and user is not None:
        request.garden_device_for = user.get_username()


def connect() -> None:
    user_login_failed.connect(_failed, dispatch_uid="garden-login-failed")
    user_logged_in.connect(_signed_in, dispatch_uid="garden-login-device")


class SignInMiddleware:
    """Stands in front of the sign-in forms: a slowed username is answered 429 LOGIN_SLOWED
    before its password is checked; a sign-in that succeeded gets a fresh device cookie."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path in _SIGN_IN_PATHS:
            username = str(request.POST.get("username", ""))
            credentials = {"username": username}
            if not known_device(request, credentials):
                seconds = slowed_for(username)
                if seconds:
                    return slowed_response(request, username, seconds)
        response = self.get_response(request)
        signed_in_as = getattr(request, "garden_device_for", None)
        if signed_in_as and settings.GARDEN_LOGIN_DEVICE_DAYS > 0:
            value = signing.dumps(
                {"u": signed_in_as.casefold(), "d": secrets.token_urlsafe(12)}, salt=_DEVICE_SALT
            )
            response.set_cookie(
                DEVICE_COOKIE,
                value,
                max_age=settings.GARDEN_LOGIN_DEVICE_DAYS * 86400,
                secure=settings.SESSION_COOKIE_SECURE,
                httponly=True,
                samesite="Lax",
            )
        return response
