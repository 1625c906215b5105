"""Log records repeated from one line of code are bounded: past ``limit`` records from the same
call site within ``window`` seconds the rest are left out, and one line says how many were
when the window has ended. A server's junk answer makes the MCP SDK warn once per bad event;
without this a 3 MB answer is over a hundred thousand console lines."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

# Call sites remembered at most; the oldest is forgotten first (its left-out count is said).
MAX_SITES = 1_000
_SUMMARY = "repeat_summary"


@dataclass
class _Site:
    logger: str
    level: int
    template: str
    started: float
    seen: int = 0
    left_out: int = 0


class RepeatFilter(logging.Filter):
    """A handler's filter: at most ``limit`` records a ``window`` from one call site (logger,
    file, line, level: an f-string message is the same call however its text varies)."""

    def __init__(
        self,
        limit: int = 20,
        window: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.limit = limit
        self.window = window
        self.clock = clock
        self._sites: OrderedDict[tuple, _Site] = OrderedDict()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, _SUMMARY, False):
            return True
        now = self.clock()
        key = (record.name, record.pathname, record.lineno, record.levelno)
        with self._lock:
            ended = self._ended(now)
            site = self._sites.get(key)
            if site is None:
                site = self._sites[key] = _Site(
                    record.name, record.levelno, str(record.msg)[:200], now
                )
                while len(self._sites) > MAX_SITES:
                    ended.append(self._sites.popitem(last=False)[1])
            site.seen += 1
            keep = site.seen <= self.limit
            if not keep:
                site.left_out += 1
        # Said outside the lock: the summary passes through this filter again.
        for gone in ended:
            if gone.left_out:
                _say(gone, now)
        return keep

    def _ended(self, now: float) -> list[_Site]:
        """The sites whose window has ended, taken out (caller holds the lock). Sites are kept
        in the order they started, so the ended ones are at the front."""
        ended: list[_Site] = []
        while self._sites:
            site = next(iter(self._sites.values()))
            if now - site.started < self.window:
                break
            ended.append(self._sites.popitem(last=False)[1])
        return ended


def _say(site: _Site, now: float) -> None:
    logging.getLogger(site.logger).log(
        site.level,
        "%s … repeated %d times more in %.0f s; those were left out",
        site.template,
        site.left_out,
        now - site.started,
        extra={_SUMMARY: True},
    )
