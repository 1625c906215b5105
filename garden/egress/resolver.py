"""Name lookups within each owner's fair share: every lookup runs on a thread of its own,
counted against its owner and its purpose (provider, tool, telegram), so a name whose server
never answers costs the owner who named it and no one else.

There is no shared queue: a lookup either starts at once or waits for a slot of its own owner
(or of its own purpose) and gives up at its timeout without ever starting. Each purpose has its
own threads, so tool lookups can never take the capacity that model calls and the Bot API
need. The system resolver cannot be interrupted once it has a name; the caller stops waiting
at its timeout and the slot stays counted against that owner until the resolver returns (its
own timeouts bound that), so the owner's next lookup waits for its own slot, never another's.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpcore
from django.conf import settings

# getaddrinfo's shape: (host, port, type=...) -> [(family, type, proto, canonname, sockaddr)].
Lookup = Callable[..., list[tuple[Any, ...]]]

_POOL_SETTING = {
    "provider": "GARDEN_EGRESS_DNS_PROVIDER_THREADS",
    "tool": "GARDEN_EGRESS_DNS_TOOL_THREADS",
    "telegram": "GARDEN_EGRESS_DNS_TELEGRAM_THREADS",
}


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    result: list[tuple[Any, ...]] | None = None
    error: BaseException | None = None


class Resolver:
    """Runs ``lookup`` (``socket.getaddrinfo`` when None, read at each call) within the limits
    GARDEN_EGRESS_DNS_PER_OWNER and GARDEN_EGRESS_DNS_<PURPOSE>_THREADS, read at each call."""

    def __init__(self, lookup: Lookup | None = None) -> None:
        self._lookup = lookup
        self._changed = threading.Condition()
        self._by_owner: dict[tuple[str, int | None], int] = {}
        self._by_purpose: dict[str, int] = {}

    def in_flight(self, *, purpose: str, owner_id: int | None = None) -> int:
        """Lookups still running for ``purpose`` (for ``owner_id``'s alone when given)."""
        with self._changed:
            if owner_id is None:
                return self._by_purpose.get(purpose, 0)
            return self._by_owner.get((purpose, owner_id), 0)

    def _full(self, purpose: str, owner_id: int | None) -> str | None:
        """Which limit a new lookup would pass, or None when one may start now."""
        pool = int(getattr(settings, _POOL_SETTING.get(purpose, "GARDEN_EGRESS_DNS_TOOL_THREADS")))
        if self._by_purpose.get(purpose, 0) >= pool:
            return f"all {pool} {purpose} lookups of this process are in flight"
        per_owner = int(settings.GARDEN_EGRESS_DNS_PER_OWNER)
        if owner_id is not None and self._by_owner.get((purpose, owner_id), 0) >= per_owner:
            return (
                f"{per_owner} {purpose} lookups of this owner are still in flight "
                "(GARDEN_EGRESS_DNS_PER_OWNER)"
            )
        return None

    def resolve(
        self, host: str, port: int, *, purpose: str, owner_id: int | None, timeout: float
    ) -> list[tuple[Any, ...]]:
        """getaddrinfo's answer for ``host``, or httpcore.ConnectTimeout naming the host when no
        answer came (or no slot was free) within ``timeout`` seconds."""
        end = time.monotonic() + timeout
        key = (purpose, owner_id)
        with self._changed:
            while (full := self._full(purpose, owner_id)) is not None:
                left = end - time.monotonic()
                if left <= 0:
                    raise httpcore.ConnectTimeout(
                        f"resolving {host!r} did not start within {timeout:g} s: {full}"
                    )
                self._changed.wait(left)
            self._by_owner[key] = self._by_owner.get(key, 0) + 1
            self._by_purpose[purpose] = self._by_purpose.get(purpose, 0) + 1
        pending = _Pending()
        try:
            threading.Thread(
                target=self._run,
                args=(pending, host, port, key),
                name=f"egress-dns-{purpose}",
                daemon=True,
            ).start()
        except BaseException:
            # No thread (the process is out of them): the slot was never used, so give it back.
            self._release(key)
            raise
        if not pending.done.wait(max(0.0, end - time.monotonic())):
            raise httpcore.ConnectTimeout(f"resolving {host!r} took longer than {timeout:g} s")
        if pending.error is not None:
            raise pending.error
        assert pending.result is not None
        return pending.result

    def _run(self, pending: _Pending, host: str, port: int, key: tuple[str, int | None]) -> None:
        try:
            lookup = self._lookup or socket.getaddrinfo
            pending.result = lookup(host, port, type=socket.SOCK_STREAM)
        except BaseException as exc:  # handed to the caller, who may have stopped waiting
            pending.error = exc
        finally:
            self._release(key)
            pending.done.set()

    def _release(self, key: tuple[str, int | None]) -> None:
        with self._changed:
            self._by_owner[key] -= 1
            if not self._by_owner[key]:
                del self._by_owner[key]
            self._by_purpose[key[0]] -= 1
            self._changed.notify_all()
