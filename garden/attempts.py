"""Failed attempts counted in the cache (Redis with REDIS_URL, so every process of the site
counts together), by key, each count lapsing a window after its first failure; and the client
address they are counted by. The sign-in slow-down (dashboard/logins.py) and the metrics
bearer's hold (garden/metrics_exposition.py) count with them."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.cache import cache


def count_failure(key: str, *, window_seconds: int) -> int:
    """One more failure in the counter at ``key`` (atomic in Redis), and how many there are; the
    counter lapses ``window_seconds`` after its first."""
    cache.add(key, 0, window_seconds)
    try:
        return cache.incr(key)
    except ValueError:  # lapsed between add and incr
        cache.set(key, 1, window_seconds)
        return 1


def client_address(meta: Mapping[str, Any]) -> str | None:
    """The address a web request's failure is counted against (``meta``: its META). Behind the
    TLS proxy (GARDEN_BEHIND_PROXY) every request comes from the proxy, so the address is the
    one the proxy appended last to X-Forwarded-For (what it saw); a client can prepend anything
    to that header, never append. Otherwise the connection's own address."""
    if settings.GARDEN_BEHIND_PROXY:
        forwarded = meta.get("HTTP_X_FORWARDED_FOR", "")
        last = forwarded.rsplit(",", 1)[-1].strip()
        try:
            return str(ipaddress.ip_address(last))
        except ValueError:
            pass  # no address, or not one: count by the connection's
    return meta.get("REMOTE_ADDR") or None
