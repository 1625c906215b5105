"""Per-owner request rates (fair share of the web tier): every signed-in person has a budget
per scope — ``read`` for GETs, ``write`` for other methods, ``messages`` for posting to a room
or a conversation, ``exports`` for a room's history as a download — set in
GARDEN_THROTTLE_RATES.

With REDIS_URL set, every web process counts together in Redis, and the check and the count
are one Lua script (a sliding window in a sorted set: drop what is older than the window,
admit and record only while under the limit), so requests arriving at once cannot all read
"under the limit" before any of them is counted. Without Redis (the embedded default, one
process), DRF's own history in the local cache, under a process lock.
"""

from __future__ import annotations

import secrets
import threading
from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from garden.redis_conn import redis_client

_SCOPE_NAMES = {
    "read": "reading",
    "write": "changes",
    "messages": "posting messages",
    "exports": "exports",
    "search": "searches",
}
_PERIODS = {"s": "second", "m": "minute", "h": "hour", "d": "day"}

# KEYS[1] the window; ARGV: window in ms, limit, a unique member. Redis's clock, so web hosts
# whose clocks differ still share one window. Returns {1, 0} admitted, or {0, ms to wait}.
_WINDOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  return {1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, math.max(1, tonumber(oldest[2]) + window - now)}
"""
_script = None
_local = threading.Lock()


def _window_script():
    global _script
    if _script is None:
        _script = redis_client().register_script(_WINDOW)
    return _script


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
        self._wait: float | None = None

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
        if settings.REDIS_URL:
            allowed = self._allow_in_redis(request, view)
        else:
            with _local:  # one process: its threads take turns reading and writing the history
                allowed = super().allow_request(request, view)
        if allowed:
            return True
        raise OwnerThrottled(self.wait(), scope=self.scope, rate=self.rate)

    def _allow_in_redis(self, request: Request, view: Any) -> bool:
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        admitted, wait_ms = _window_script()(
            keys=[redis_key(key)],
            args=[int(self.duration * 1000), self.num_requests, secrets.token_hex(8)],
        )
        self._wait = None if admitted else int(wait_ms) / 1000
        return bool(admitted)

    def wait(self) -> float | None:
        if settings.REDIS_URL:
            return self._wait
        return super().wait()


def redis_key(cache_key: str) -> str:
    """The Redis key of a rate window: under the site's prefix, like its other keys."""
    return f"{settings.GARDEN_CACHE_PREFIX}:{cache_key}"
