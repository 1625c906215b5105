"""Prometheus metrics of every garden process: what each records as it works (steps, model
calls, tokens, slots, locks, fences, sweeps, approvals, beats, sockets), and the figures read
from the database at scrape time. docs/operations.md, "Metrics".

Off unless configured (GARDEN_METRICS_TOKEN, GARDEN_METRICS_DIR or GARDEN_METRICS_PORT): then
every recording function returns at its first line. With GARDEN_METRICS_DIR the processes of one
host write their samples to files there (garden/metrics_dir.py) and whichever serves them (the
web's /metrics, a worker's GARDEN_METRICS_PORT: garden/metrics_exposition.py) adds them up.
Labels are few-valued only: provider, model, purpose, outcome, state, kind; never an owner, a
group, a request or free text. A model label is a model garden knows (``_model``), else "other".
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

# Imported before any metric exists: it sets up the multiprocess directory.
from garden.metrics_dir import ENABLED

log = logging.getLogger(__name__)

# What this process records; a scrape in multiprocess mode reads the files instead.
REGISTRY = CollectorRegistry(auto_describe=True)

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
_CALL_SECONDS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)
_TOOL_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_WAIT_SECONDS = (10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400)

STEPS = Histogram(
    "garden_step_seconds",
    "Wall time of one step of a request (groups/loop/step.py advance_request), by what it ended in.",
    ["outcome"],
    buckets=_SECONDS,
    registry=REGISTRY,
)
MODEL_CALLS = Histogram(
    "garden_model_call_seconds",
    "Wall time of one model call, by provider, model, purpose and outcome (ok or the error code).",
    ["provider", "model", "purpose", "outcome"],
    buckets=_CALL_SECONDS,
    registry=REGISTRY,
)
TOKENS = Counter(
    "garden_model_tokens",
    "Tokens of model calls as the provider counted them, by provider, model and direction.",
    ["provider", "model", "direction"],
    registry=REGISTRY,
)
COST = Counter(
    "garden_model_cost_usd",
    "What model calls cost at the price table's prices (US dollars), by provider and model.",
    ["provider", "model"],
    registry=REGISTRY,
)
UNPRICED = Counter(
    "garden_model_calls_unpriced",
    "Replied model calls whose model has no price (their cost is unknown, not zero).",
    ["provider", "model"],
    registry=REGISTRY,
)
IN_FLIGHT = Gauge(
    "garden_in_flight",
    "Owners' slots held now across the processes: model calls (kind=calls), tool runs (kind=tools) and webhook tries (kind=webhooks).",
    ["kind"],
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
SLOT_WAITS = Counter(
    "garden_slot_waits",
    "Steps that found all of their owner's slots of a kind taken and came back later.",
    ["kind"],
    registry=REGISTRY,
)
LOCK_CONTENDED = Counter(
    "garden_lock_contended",
    "Group locks found held by another step (the task retries shortly), by lock backend.",
    ["backend"],
    registry=REGISTRY,
)
FENCE_REFUSALS = Counter(
    "garden_fence_refusals",
    "Stale or duplicate step deliveries refused by the request's fence: at the claim, or at a write.",
    ["at"],
    registry=REGISTRY,
)
SWEEPER = Counter(
    "garden_sweeper_recoveries",
    "Requests and approvals a crash stranded that the sweeper put back on their way, by kind.",
    ["kind"],
    registry=REGISTRY,
)
REQUESTS_FINISHED = Counter(
    "garden_requests_finished",
    "Requests that ended, by final state and outcome code.",
    ["state", "outcome"],
    registry=REGISTRY,
)
APPROVALS_CREATED = Counter(
    "garden_approvals_created",
    "Tool actions that asked a person for approval.",
    ["source"],
    registry=REGISTRY,
)
APPROVALS_DECIDED = Counter(
    "garden_approvals_decided",
    "Approvals decided by a person, by decision (approved, rejected).",
    ["decision"],
    registry=REGISTRY,
)
APPROVAL_WAIT = Histogram(
    "garden_approval_wait_seconds",
    "How long a decided approval waited for its person.",
    ["decision"],
    buckets=_WAIT_SECONDS,
    registry=REGISTRY,
)
WORKER_BEATS = Counter(
    "garden_worker_beats",
    "Worker beats written (outcome ok) or failed (outcome failed) by workers' beat threads.",
    ["outcome"],
    registry=REGISTRY,
)
WEBSOCKETS = Gauge(
    "garden_websocket_connections",
    "Dashboard websockets open now, by consumer (group, conversation, roster).",
    ["consumer"],
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
TOOL_CALLS = Histogram(
    "garden_tool_call_seconds",
    "Wall time of one tool run, by where the tool comes from (builtin, mcp) and outcome (ok, error).",
    ["source", "outcome"],
    buckets=_TOOL_SECONDS,
    registry=REGISTRY,
)

# The figures read from the database when scraped (registered by the apps that own the rows).
_scrape_gauges: list[Callable[[], Iterable[Metric]]] = []


def register_scrape_gauges(read: Callable[[], Iterable[Metric]]) -> None:
    """``read`` yields metric families (GaugeMetricFamily) from cheap aggregate queries; it
    runs at every scrape of the process that serves /metrics, never on a step."""
    if read not in _scrape_gauges:
        _scrape_gauges.append(read)


def gauge(name: str, documentation: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    """A scrape-time gauge family (for ``register_scrape_gauges``)."""
    return GaugeMetricFamily(name, documentation, labels=list(labels))


class ScrapeGauges:
    """The registered database-read gauges as one collector, for a scrape (and how many of
    their groups failed)."""

    def collect(self) -> Iterator[Metric]:
        failed = 0
        for read in _scrape_gauges:
            try:
                yield from list(read())
            except Exception:  # a database away must not take the process's own samples with it
                log.warning("metrics: %s failed", getattr(read, "__name__", read), exc_info=True)
                failed += 1
        errors = gauge(
            "garden_scrape_gauge_errors", "Database-read gauge groups that failed this scrape."
        )
        errors.add_metric([], failed)
        yield errors


# Label values: a model is named by an owner's account, and one owner could name thousands.
_UNSAFE = re.compile(r"[^A-Za-z0-9._:/@+-]")
_known_model: Callable[..., str | None] | None = None


def name_models_by(known: Callable[..., str | None]) -> None:
    """``known(provider=, model=)`` answers the name garden knows a model by, or None
    (garden.pricing.known_model: the operator's GARDEN_MODEL_PRICES and the price table's
    models of the call's provider); registered by the garden app at start-up."""
    global _known_model
    _known_model = known


def _model(provider: str, name: str) -> str:
    """A model as a label: the name garden knows it by, else "other" ("none" when there is no
    model). The label values are then a fixed set, the operator's and the installed price
    table's, whatever owners name: no owner's junk names can take a label, so none can crowd
    out the site's models either (a first-come cap of distinct names would let one owner fill
    it)."""
    if not name:
        return "none"
    known = _known_model(provider=provider, model=name) if _known_model else None
    return _UNSAFE.sub("_", known)[:80] if known else "other"


_CODE = re.compile(r"[A-Za-z0-9_.-]{1,48}")


def _code(value: str) -> str:
    """An outcome or error code as a label: codes are code-defined constants; anything else
    (it should not happen) is "other"."""
    value = str(value or "")
    return value if _CODE.fullmatch(value) else ("none" if not value else "other")


# Recording: each returns at once when metrics are off.


def model_call(
    *,
    provider: str,
    model: str,
    purpose: str,
    outcome: str,
    seconds: float,
    input_tokens: int = 0,
    output_tokens: int = 0,
) -> None:
    if not ENABLED:
        return
    provider, model = _code(provider), _model(provider, model)
    MODEL_CALLS.labels(provider, model, _code(purpose), _code(outcome)).observe(seconds)
    if input_tokens:
        TOKENS.labels(provider, model, "input").inc(input_tokens)
    if output_tokens:
        TOKENS.labels(provider, model, "output").inc(output_tokens)


def model_cost(*, provider: str, model: str, usd: Decimal | float | None) -> None:
    """A replied call's cost; None: its model has no price (counted as unpriced)."""
    if not ENABLED:
        return
    label = _model(provider, model)
    if usd is None:
        UNPRICED.labels(_code(provider), label).inc()
    elif usd > 0:
        COST.labels(_code(provider), label).inc(float(usd))


def slot_taken(kind: str) -> None:
    if ENABLED:
        IN_FLIGHT.labels(_code(kind)).inc()


def slot_given_back(kind: str) -> None:
    if ENABLED:
        IN_FLIGHT.labels(_code(kind)).dec()


def slot_wait(kind: str) -> None:
    if ENABLED:
        SLOT_WAITS.labels(_code(kind)).inc()


def lock_contended(backend: str) -> None:
    if ENABLED:
        LOCK_CONTENDED.labels(_code(backend)).inc()


def fence_refused(at: str) -> None:
    if ENABLED:
        FENCE_REFUSALS.labels(_code(at)).inc()


def sweeper_recovered(found: dict[str, int]) -> None:
    if ENABLED:
        for kind, count in found.items():
            if count:
                SWEEPER.labels(_code(kind)).inc(count)


def request_finished(state: str, outcome: str) -> None:
    if ENABLED:
        REQUESTS_FINISHED.labels(_code(state), _code(outcome)).inc()


def approval_created(source: str) -> None:
    if ENABLED:
        APPROVALS_CREATED.labels(_code(source)).inc()


def approval_decided(decision: str, waited_seconds: float) -> None:
    if ENABLED:
        APPROVALS_DECIDED.labels(_code(decision)).inc()
        APPROVAL_WAIT.labels(_code(decision)).observe(max(0.0, waited_seconds))


def worker_beat(ok: bool) -> None:
    if ENABLED:
        WORKER_BEATS.labels("ok" if ok else "failed").inc()


def websocket_opened(consumer: str) -> None:
    if ENABLED:
        WEBSOCKETS.labels(_code(consumer)).inc()


def websocket_closed(consumer: str) -> None:
    if ENABLED:
        WEBSOCKETS.labels(_code(consumer)).dec()


def tool_call(*, source: str, outcome: str, seconds: float) -> None:
    if ENABLED:
        TOOL_CALLS.labels(_code(source), _code(outcome)).observe(seconds)


def _same(outcome: Any) -> Any:
    return outcome


@contextmanager
def step_timed() -> Iterator[Callable[[Any], Any]]:
    """Time the block as one step: it passes its outcome through the function it is handed
    (``return ended(step(...))``); an exception is the outcome by its class's name."""
    if not ENABLED:
        yield _same
        return
    start, ended = time.monotonic(), ["none"]

    def end(outcome: Any) -> Any:
        ended[0] = str(outcome)
        return outcome

    try:
        yield end
    except BaseException as exc:
        ended[0] = type(exc).__name__
        raise
    finally:
        STEPS.labels(_code(ended[0])).observe(time.monotonic() - start)
