"""Tasks the broker could not take, kept and sent again once it answers, and the Redis epoch
that says when it lost what it held.

A send that fails (Redis restarting, failing over, out of reach) is kept here, in the process
that made it, and a thread of that process sends it again every GARDEN_RESEND_SECONDS until the
broker takes it: the write it follows is committed, and its next step is on its way seconds
after Redis returns instead of when the sweeper finds it. A process that dies meanwhile loses
the list; the sweeper (GARDEN_SWEEP_AFTER_SECONDS) still finds that work.

A Redis that restarts empty loses every queued task. Each worker's beat (garden/heartbeat.py)
asks ``redis_lost``: the site's epoch key is gone, and the worker that writes it anew sends
``work_lost``, whose receivers send again what waited on a queued task (the group loop: the
next step of every request whose step completed, the first of every idle group's queue).
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections import deque
from collections.abc import Callable

from django.conf import settings
from django.dispatch import Signal

log = logging.getLogger(__name__)

# Sent by the worker that found the Redis epoch gone: every task queued before may be lost.
work_lost = Signal()

# At most this many sends kept per process; past it the oldest are left to the sweeper.
KEEP = 10_000

_kept: deque[Callable[[], None]] = deque(maxlen=KEEP)
_lock = threading.Lock()
_resender: threading.Thread | None = None


def keep(send: Callable[[], None], what: str, exc: BaseException) -> None:
    """Keep ``send`` (which just failed with ``exc``) to try again until the broker takes it."""
    global _resender
    log.warning("the broker did not take %s (%s): sending it again when it answers", what, exc)
    with _lock:
        _kept.append(send)
        if _resender is None or not _resender.is_alive():
            _resender = threading.Thread(target=_resend_loop, name="garden-resend", daemon=True)
            _resender.start()


def kept() -> int:
    """How many sends wait for the broker in this process."""
    return len(_kept)


def resend() -> int:
    """Send what was kept, in order, until one fails again (it stays first); how many went."""
    sent = 0
    while True:
        with _lock:
            if not _kept:
                return sent
            send = _kept[0]
        try:
            send()
        except Exception as exc:  # still away: the next round tries again
            log.info("the broker is still away (%s); %d sends wait", type(exc).__name__, kept())
            return sent
        with _lock:
            if _kept and _kept[0] is send:
                _kept.popleft()
        sent += 1


def _resend_loop() -> None:
    global _resender
    stop = threading.Event()
    while True:
        stop.wait(settings.GARDEN_RESEND_SECONDS)
        sent = resend()
        if sent:
            log.warning("sent %d kept task(s) now that the broker answers", sent)
        with _lock:
            if not _kept:
                _resender = None
                return


def _epoch_key() -> str:
    return f"{settings.GARDEN_CACHE_PREFIX}:epoch"


def redis_lost() -> bool:
    """Whether the site's Redis lost its data since a process last wrote the epoch (it
    restarted empty): true for the one caller that writes it anew. False without Redis."""
    if not settings.REDIS_URL:
        return False
    from garden.redis_conn import redis_client

    return bool(redis_client().set(_epoch_key(), secrets.token_hex(8), nx=True))


def check_epoch(*, first: bool = False) -> bool:
    """``redis_lost``, and when so ``work_lost`` sent (its receivers' failures logged) — but
    not on a worker's ``first`` look: an epoch missing then is a new Redis as often as a lost
    one (the site's first worker, a new site), and the worker only writes it."""
    if not redis_lost() or first:
        return False
    log.warning("Redis has lost what it held (it restarted empty): sending queued work again")
    for receiver, result in work_lost.send_robust(sender=None):
        if isinstance(result, Exception):
            log.error("%s failed after Redis was lost: %r", receiver, result)
    return True
