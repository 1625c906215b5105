"""Per-owner request rates (fair share of the web tier): every signed-in person has a budget
per scope — ``read`` for GETs, ``write`` for other methods, ``messages`` for posting to a room
or a conversation — set in GARDEN_THROTTLE_RATES and kept in the shared cache (Redis when
REDIS_URL is set), so every web process counts together."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

_SCOPE_NAMES = {"read": "reading", "write": "changes", "messages": "posting messages"}
_PERIODS = {"s": "second", "m": "minute", "h": "hour", "d": "day"}


class OwnerThrottled(exceptions.Throttled):
    default_code = "THROTTLED"

    def __init__(self, wait: float | None, *, scope: str, rate: str) -> None:
        count, _, period = rate.partition("/")
        per = _PERIODS.get(period[:1], period)
        seconds = max(1, round(wait or 1))
        super().__init__(
            wait=wait,
            detail=(
                f"Too many requests: the limit for {_SCOPE_NAMES.get(scope, scope)} is {count} per "
                f"{per}. Try again in {seconds} s."
            ),
        )


class OwnerRateThrottle(SimpleRateThrottle):
    """A view picks a scope per method with ``throttle_scopes = {"POST": "messages"}``;
    otherwise GETs are ``read`` and the rest ``write``."""

    cache_format = "throttle_%(scope)s_%(ident)s"

    def __init__(self) -> None:  # the rate is chosen per request, from the view
        pass

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if not request.user or not request.user.is_authenticated:
            return None  # refused by the permission check anyway
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}

    def allow_request(self, request: Request, view: Any) -> bool:
        scopes = getattr(view, "throttle_scopes", {})
        self.scope = scopes.get(request.method) or (
            "read" if request.method in ("GET", "HEAD", "OPTIONS") else "write"
        )
        self.rate = settings.GARDEN_THROTTLE_RATES.get(self.scope)
        if not self.rate:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        if super().allow_request(request, view):
            return True
        raise OwnerThrottled(self.wait(), scope=self.scope, rate=self.rate)
