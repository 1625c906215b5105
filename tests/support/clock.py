"""One clock for the tests that move time instead of waiting for it."""

from __future__ import annotations

from datetime import datetime, timedelta


class Clock:
    """The time two of garden's readers see, moved by the test: ``timezone.now`` as
    ``groups.services.groups`` reads it (a group's delete, undo and purge) and
    ``garden.budgets._clock`` (the minute and the day of the token budgets). Nothing else
    reads it; nothing sleeps."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    def into_a_minute(self, seconds: float) -> datetime:
        """Set the clock ``seconds`` past the start of its current minute."""
        self.now = self.now.replace(second=0, microsecond=0) + timedelta(seconds=seconds)
        return self.now

    def timestamp(self) -> float:
        return self.now.timestamp()
