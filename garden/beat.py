"""One Celery beat sends the schedule, however many run (two hosts, a rolling update).

The beats share one lease row (garden.models.BeatLease). A beat renews it every
GARDEN_BEAT_RENEW_SECONDS with one UPDATE that succeeds only when the row names it, names
nobody, or has lapsed; the lease lasts GARDEN_BEAT_LEASE_SECONDS from the database's clock, so
beats on hosts whose clocks differ agree on it. The beat holding it sends the schedule as
django-celery-beat's DatabaseScheduler does (the schedule stays in the database, editable in
the admin); any other sends nothing and asks again at its next renewal. A beat that stops
warm names nobody, and the next beat to ask takes it; a beat that dies holds it until it
lapses. Every statement is a single autocommit UPDATE: no session state, so it works behind
PgBouncer in transaction mode and on the embedded SQLite database alike.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections
from django.db.models import DateTimeField, ExpressionWrapper, Q
from django.db.models.functions import Now
from django.utils import timezone
from django_celery_beat.schedulers import DatabaseScheduler

from garden.models import BeatLease

log = logging.getLogger(__name__)

LEASE_NAME = "beat"


def _now_plus(seconds: float) -> ExpressionWrapper:
    return ExpressionWrapper(Now() + timedelta(seconds=seconds), output_field=DateTimeField())


def lease_take(*, holder: str, seconds: float) -> bool:
    """Take or renew the beat lease for ``holder`` for ``seconds`` from now (the database's
    now): True when ``holder`` holds it afterwards. One UPDATE, which succeeds when ``holder``
    held it, nobody did, or it had lapsed; the row is made on the first ask of a site."""
    for _ in range(2):
        taken = (
            BeatLease.objects.filter(name=LEASE_NAME)
            .filter(Q(holder=holder) | Q(holder="") | Q(expires_at__lt=Now()))
            .update(holder=holder, expires_at=_now_plus(seconds), ticked_at=Now())
        )
        if taken:
            return True
        if BeatLease.objects.filter(name=LEASE_NAME).exists():
            return False
        BeatLease.objects.bulk_create(
            [BeatLease(name=LEASE_NAME, holder="", expires_at=timezone.now())],
            ignore_conflicts=True,
        )
    return False


def lease_release(*, holder: str) -> bool:
    """Give the lease up if ``holder`` holds it, so the next beat to ask takes it at once
    (its last tick is kept: the beat's liveness)."""
    return bool(
        BeatLease.objects.filter(name=LEASE_NAME, holder=holder).update(holder="", expires_at=Now())
    )


class LeasedScheduler(DatabaseScheduler):
    """django-celery-beat's DatabaseScheduler that sends only while it holds the beat lease.

    A beat that takes the lease reads the schedule again from the database first, with the
    runs the previous holder recorded, and records each run it sends at once, so the beat that
    follows it sends nothing twice."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.lease_seconds = float(settings.GARDEN_BEAT_LEASE_SECONDS)
        self.renew_seconds = float(settings.GARDEN_BEAT_RENEW_SECONDS)
        if not 0 < self.renew_seconds < self.lease_seconds:
            raise ImproperlyConfigured(
                f"GARDEN_BEAT_RENEW_SECONDS ({self.renew_seconds:g}) must be above 0 and "
                f"below GARDEN_BEAT_LEASE_SECONDS ({self.lease_seconds:g}): a beat renews its "
                "lease before it lapses."
            )
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._holds_until = float("-inf")  # time.monotonic() until which this beat may send
        self._renew_at = float("-inf")
        super().__init__(*args, **kwargs)

    @property
    def holds_lease(self) -> bool:
        return time.monotonic() < self._holds_until

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if time.monotonic() >= self._renew_at:
            self._renew()
        if not self.holds_lease:
            return self._until_renewal()
        delay = super().tick(*args, **kwargs)
        if self._dirty:  # what was sent is recorded before the next send
            self.sync()
        return min(delay, self._until_renewal())

    def reserve(self, entry: Any) -> Any:
        # DatabaseScheduler leaves the entry it just sent in the schedule, with the run before
        # this one: a heap rebuilt from it (a schedule change read mid-tick invalidates the heap
        # again) finds the entry due and sends it a second time. The schedule keeps the run.
        new_entry = super().reserve(entry)
        if self._schedule is not None and new_entry.name in self._schedule:
            self._schedule[new_entry.name] = new_entry
        return new_entry

    def _until_renewal(self) -> float:
        return max(0.0, min(self._renew_at - time.monotonic(), self.max_interval))

    def _renew(self) -> None:
        asked = time.monotonic()
        held = asked < self._holds_until
        try:
            close_old_connections()
            taken = lease_take(holder=self.holder, seconds=self.lease_seconds)
            if taken and not held:  # the runs the last holder recorded, before sending any
                self._schedule = self.all_as_schedule()
                self._heap = None  # rebuilt from them
        except Exception:  # the database away: send nothing until the lease is renewed
            log.warning("beat: the lease cannot be renewed; sending nothing", exc_info=True)
            taken = False
        self._renew_at = asked + self.renew_seconds
        if not taken:
            if held:
                log.warning("beat %s: lost the lease; sending nothing", self.holder)
            self._holds_until = float("-inf")
            return
        if not held:
            log.info("beat %s: holds the lease; sending the schedule", self.holder)
        # Measured from before the UPDATE: the row's lease ends no sooner than this.
        self._holds_until = asked + self.lease_seconds

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.holds_lease:
                self._holds_until = float("-inf")
                try:
                    close_old_connections()
                    lease_release(holder=self.holder)
                except Exception:  # it lapses on its own
                    log.warning("beat: the lease cannot be released", exc_info=True)
