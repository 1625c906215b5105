"""The site's figures read from the database when /metrics is scraped (garden/metrics.py runs
them in the serving process, never on a step): requests by active state, the queue's depth and
its oldest request's age, approvals pending and the oldest's wait, live workers and the last
beat's age, Celery beat's last tick, the broker's backlog; and the requests that end, counted as
their ending commits."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Max, Min
from django.utils import timezone
from prometheus_client.core import Metric

from garden import metrics
from garden.models import BeatLease, WorkerBeat
from garden.redis_conn import redis_client
from groups.models import Approval, GroupRequest

# The states a request is counted in now; an ended one is counted once, as it ends
# (garden_requests_finished_total), not read from an ever-growing table at every scrape.
COUNTED_STATES = (GroupRequest.State.QUEUED, *GroupRequest.ACTIVE_STATES)


def site_gauges() -> Iterator[Metric]:
    now = timezone.now()
    by_state = dict(
        GroupRequest.objects.filter(state__in=COUNTED_STATES)
        .order_by()
        .values("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    requests = metrics.gauge(
        "garden_requests", "Requests in each unfinished state now.", labels=("state",)
    )
    for state in COUNTED_STATES:
        requests.add_metric([str(state)], by_state.get(state, 0))
    yield requests

    queued = GroupRequest.objects.filter(state=GroupRequest.State.QUEUED).aggregate(
        oldest=Min("created_at")
    )
    depth = metrics.gauge("garden_queue_depth", "Requests queued behind their group's active one.")
    depth.add_metric([], by_state.get(GroupRequest.State.QUEUED, 0))
    yield depth
    yield _age("garden_queue_oldest_age_seconds", "Age of the oldest queued request.", queued, now)

    pending = Approval.objects.filter(status=Approval.Status.PENDING).aggregate(
        n=Count("id"), oldest=Min("created_at")
    )
    count = metrics.gauge("garden_approvals_pending", "Approvals waiting for a person now.")
    count.add_metric([], pending["n"])
    yield count
    yield _age(
        "garden_approvals_oldest_pending_age_seconds",
        "How long the oldest pending approval has waited.",
        pending,
        now,
    )

    since = now - timedelta(seconds=settings.GARDEN_WORKER_STALE_SECONDS)
    beats = WorkerBeat.objects.aggregate(last=Max("beat_at"))
    alive = metrics.gauge(
        "garden_workers_alive",
        "Worker processes whose beat is fresher than GARDEN_WORKER_STALE_SECONDS.",
    )
    alive.add_metric([], WorkerBeat.objects.filter(beat_at__gte=since).count())
    yield alive
    last = metrics.gauge(
        "garden_worker_last_beat_age_seconds",
        "Seconds since any worker last beat (absent when no worker ever did).",
    )
    if beats["last"] is not None:
        last.add_metric([], (now - beats["last"]).total_seconds())
    yield last

    ticked = BeatLease.objects.aggregate(last=Max("ticked_at"))["last"]
    beat = metrics.gauge(
        "garden_beat_last_tick_age_seconds",
        "Seconds since the beat holding the lease last renewed it (absent when none ever did).",
    )
    if ticked is not None:
        beat.add_metric([], max(0.0, (now - ticked).total_seconds()))
    yield beat

    if settings.REDIS_URL:
        backlog = metrics.gauge(
            "garden_broker_queue_length", "Tasks waiting in the broker's default queue."
        )
        backlog.add_metric(
            [], redis_client().llen(getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery"))
        )
        yield backlog


def _age(name: str, documentation: str, found: dict[str, Any], now: Any) -> Metric:
    age = metrics.gauge(name, documentation + " 0 when there is none.")
    oldest = found["oldest"]
    age.add_metric([], max(0.0, (now - oldest).total_seconds()) if oldest else 0.0)
    return age


def on_request_finished(
    sender: Any = None, *, state: str = "", outcome_code: str = "", **_: Any
) -> None:
    """groups.signals.request_finished (sent once the ending commits)."""
    metrics.request_finished(state, outcome_code)
