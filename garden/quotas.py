"""Owner quotas, checked without races: the change is written first, then the owner's lock is
taken — always last in the transaction, so it can never be part of a lock cycle — and the
count, which now includes the change, is held to the limit (a refusal rolls everything back).

On PostgreSQL the lock is a transaction-scoped advisory lock on the owner (it blocks nobody's
row locks or foreign-key checks); SQLite already runs one writing transaction at a time.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection

from garden.errors import QuotaExceeded

_NAMESPACE = 0x67617264  # "gard": keeps garden's advisory keys apart from anyone else's


def owner_lock(owner_id: int) -> None:
    """Serialise this owner's quota checks until the transaction ends. Take it last."""
    if not connection.in_atomic_block:
        raise RuntimeError("an owner's quota lock is taken inside a transaction")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [(_NAMESPACE << 32) | owner_id])


def quota_hold(
    *, owner_id: int, count: Callable[[], int], limit: int, refusal: Callable[[], QuotaExceeded]
) -> None:
    """After writing the change: raise ``refusal()`` when ``count()`` passes ``limit``."""
    owner_lock(owner_id)
    if count() > limit:
        raise refusal()
