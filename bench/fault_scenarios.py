"""The fault harness's scenarios: each injects one kind of fault (SIGKILL at a point of a step,
SIGSTOP past the lock TTL, a Redis restart, dropped PostgreSQL connections, a faulty provider)
into live requests and returns its ``Result``, violations included."""

from __future__ import annotations

import random
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.fault_harness import Harness, db_retry
from bench.fault_invariants import stale_write_violations, unknown_outcome_violations
from bench.fault_mcp import AGENT_TOOL
from bench.fault_processes import LOCK_TTL, RedisServer, terminate_backends
from bench.fault_report import Result

# How long after a SIGSTOP the harness asks the provider which of the worker's calls it
# still holds (well under the 1 s model latency of the SIGSTOP trials).
STOP_SETTLE = 0.2
POINTS = ("before_reserve", "before_dispatch", "during_call", "after_reply", "after_write")
# Per hit of the point: high enough to die within a few steps, low enough that the step that
# dies is not always a request's first.
KILL_PROBABILITY = 0.3


def scenario_kill(
    h: Harness,
    point: str,
    trials: int,
    *,
    rng: random.Random,
    bound: float = 120,
    probability: float = KILL_PROBABILITY,
) -> Result:
    """SIGKILL a worker at ``point`` of a step, ``trials`` times; a new worker (armed the same
    way) takes the next trial while the sweeper brings the stranded requests back. Each time
    the point is reached the worker dies with ``probability``: below 1 the kill lands at varied
    steps of a request; at 1 it is certain, at the first."""
    result, started = Result(f"SIGKILL {point.replace('_', ' ')}"), time.monotonic()
    latency = 0.5 if point == "during_call" else 0.02
    env = (
        {}
        if point == "during_call"
        else {"GARDEN_FAULT_POINT": point, "GARDEN_FAULT_PROBABILITY": str(probability)}
    )
    ids: list[int] = []
    for _ in range(trials):
        batch = h.new_requests(1, latency=latency)
        ids += batch
        worker = h.spawn(f"kill-{point}-", env)
        deadline = time.monotonic() + 20
        if point == "during_call":
            while worker.alive and time.monotonic() < deadline:
                if h.calls_in_flight([worker]):
                    time.sleep(rng.uniform(0, latency * 0.6))
                    worker.signal(signal.SIGKILL)
                    break
                time.sleep(0.01)
        # Until the worker dies — or the trial's request ended without its fault (a short
        # request, a 1:1 one say, may pass its points without a kill): no point waiting more.
        while worker.alive and h.unfinished(batch) and time.monotonic() < deadline:
            time.sleep(0.02)
        worker.wait_exit(0.2)
        _end_trial(h, result, worker, ids)
    result.note = (
        f"probability {probability} per hit"
        if point != "during_call"
        else f"killed 0-{latency * 0.6:g} s into a {latency:g} s call"
    )
    return h.finish(result, ids, bound=bound, started=started)


def _end_trial(h: Harness, result: Result, worker: Any, ids: list[int]) -> None:
    """A trial's worker is done (killed, or stopped here if it was not): count the fault, the
    trial, and check safety so far."""
    if worker.killed:
        result.faults += 1
    else:
        worker.stop()
    h.workers.remove(worker)
    result.trials += 1
    result.violations += h.check_safety(ids)


def scenario_stop(
    h: Harness,
    trials: int,
    *,
    rng: random.Random,
    workers: int = 5,
    active: int = 15,
    latency: float = 1.0,
    bound: float = 120,
) -> Result:
    """SIGSTOP a worker while the provider holds one of its calls; once another worker has
    taken each of its steps over (fence moved), SIGCONT it. The stale steps must not write:
    no message at their fence, their reservation settled as lost by the takeover."""
    result, started = Result("SIGSTOP past lock TTL, then SIGCONT"), time.monotonic()
    # INFO, so each task's return value is logged: a stale step says 'stale'.
    pool = [h.spawn("stop-", loglevel="info") for _ in range(workers)]
    ids = h.new_requests(active, latency=latency)
    frozen: dict[Any, tuple[float, list[tuple[int, int]]]] = {}
    checks: list[tuple[float, list[tuple[int, int]]]] = []
    stale_steps = 0
    deadline = time.monotonic() + max(120.0, trials * 6.0)
    while (result.trials < trials or frozen or checks) and time.monotonic() < deadline:
        now = time.monotonic()
        for worker, (since, subjects) in list(frozen.items()):
            current = h.fences([pk for pk, _ in subjects])
            taken = all(current[pk][0] > fence for pk, fence in subjects)
            if taken or now - since > 30:
                if not taken:
                    result.violations.append(f"no takeover within 30 s of {subjects}")
                worker.signal(signal.SIGCONT)
                del frozen[worker]
                checks.append((now + 1.5, subjects))
        for due in [c for c in checks if c[0] <= now]:
            checks.remove(due)
            result.violations += db_retry(lambda due=due: stale_write_violations(due[1]))
            result.violations += h.check_safety(ids)
        running = [w for w in pool if w not in frozen]
        if result.trials < trials and len(running) > 1:
            calls = h.calls_in_flight(running)
            if calls:
                _, _, worker = rng.choice(calls)
                worker.signal(signal.SIGSTOP)
                mine = [(pk, port) for pk, port, w in calls if w is worker]
                # Only steps still inside their model call once stopped: they have written
                # nothing yet, so any message at their fence would be a stale write. A call the
                # provider answered just before the stop is gone from its books a moment later
                # (it writes the reply whether or not the worker reads it), while its worker may
                # have been stopped mid-transaction, or with its COMMIT already sent: asked
                # after that moment, the provider names only calls truly held.
                time.sleep(STOP_SETTLE)
                inside = [pk for pk, port in mine if h.port_in_flight(pk, port)]
                current = h.fences(inside)
                subjects = [
                    (pk, current[pk][0]) for pk in inside if current[pk][1] < current[pk][0]
                ]
                if subjects:
                    frozen[worker] = (time.monotonic(), subjects)
                    result.trials += 1
                    result.faults += 1
                    stale_steps += len(subjects)
                else:
                    worker.signal(signal.SIGCONT)
        live = h.unfinished(ids)
        if len(live) < active and result.trials < trials:
            ids += h.new_requests(active - len(live), latency=latency)
        time.sleep(0.05)
    for worker in frozen:
        worker.signal(signal.SIGCONT)
    if result.trials < trials:
        result.violations.append(f"only {result.trials} of {trials} trials ran before the deadline")
    result = h.finish(result, ids, bound=bound, started=started)
    h.retire(pool)
    resumed = stale_returns([w.log_path for w in pool], longer_than=LOCK_TTL)
    result.details.update({"frozen_steps": stale_steps, "resumed_stale": resumed})
    result.note = (
        f"{stale_steps} steps frozen in a model call; {resumed} steps resumed after their lock "
        f"expired and gave up as stale (worker logs); lock TTL {LOCK_TTL} s, call {latency:g} s, "
        f"{workers} workers"
    )
    return result


def stale_returns(logs: list[Path], *, longer_than: float) -> int:
    """Steps that ran longer than the lock TTL and returned 'stale': the frozen ones, refused
    by the fence when they tried to record their reply."""
    pattern = re.compile(r"groups\.advance_request\[[^\]]+\] succeeded in ([0-9.]+)s: 'stale'")
    count = 0
    for path in logs:
        for match in pattern.finditer(Path(path).read_text(errors="replace")):
            count += float(match.group(1)) > longer_than
    return count


def scenario_redis(
    h: Harness, redis: RedisServer, trials: int, *, rng: random.Random, bound: float = 90
) -> Result:
    """Restart Redis (it keeps nothing: queued tasks and locks are gone) during requests."""
    result = Result("restart Redis (broker + locks)")
    exited = _cut_during_requests(
        h,
        result,
        trials,
        redis.restart,
        rng=rng,
        name="redis-",
        latency=0.2,
        pause=(0.5, 2.0),
        bound=bound,
    )
    # kombu 5.7 on Redis: the consumer's reconnect dies in restore_unacked ("Unrecoverable
    # error: 'NoneType' object has no attribute 'hostname'") and the worker exits.
    result.note = (
        f"{'the shared' if redis.shared else 'a private'} redis-server on :{redis.port}; "
        f"{exited} workers exited on a restart and were restarted by the harness's supervisor"
    )
    return result


def scenario_pg(
    h: Harness,
    database: str,
    trials: int,
    *,
    rng: random.Random,
    server: str | None = None,
    bound: float = 90,
) -> Result:
    """Terminate every backend of the harness database mid-step (workers' and the harness's;
    behind PgBouncer, its server sessions), asked of the PostgreSQL server at ``server``."""
    result = Result("drop PostgreSQL connections")
    dropped = 0

    def cut() -> None:
        nonlocal dropped
        dropped += terminate_backends(database, server=server)

    exited = _cut_during_requests(
        h, result, trials, cut, rng=rng, name="pg-", latency=0.1, pause=(0.3, 1.5), bound=bound
    )
    result.note = f"{dropped} backends terminated; {exited} workers exited"
    return result


def _cut_during_requests(
    h: Harness,
    result: Result,
    trials: int,
    cut: Callable[[], None],
    *,
    rng: random.Random,
    name: str,
    latency: float,
    pause: tuple[float, float],
    bound: float,
) -> int:
    """``trials`` times: a batch of requests, ``cut`` a random ``pause`` into it, then the batch
    must finish within ``bound`` while workers that exit are replaced. Fills ``result`` and
    returns how many workers exited."""
    started = time.monotonic()
    pool = [h.spawn(name) for _ in range(2)]
    ids: list[int] = []
    exited = 0

    def supervise() -> None:
        nonlocal exited
        exited += h.supervise(pool, name)

    for _ in range(trials):
        batch = h.new_requests(6, latency=latency)
        ids += batch
        time.sleep(rng.uniform(*pause))
        cut()
        result.faults += 1
        result.trials += 1
        result.violations += h.wait_finished(batch, bound, tick=supervise)
        result.violations += h.check_safety(ids)
    h.finish(result, ids, bound=bound, started=started)
    h.retire(pool)
    return exited


PROVIDER_MIXES = (
    {"p_timeout": 0.1, "p_reset": 0.1, "p_429": 0.1, "p_500": 0.1},
    {"p_429": 0.5},
    {"p_timeout": 0.2, "p_reset": 0.2},
    {"p_500": 0.3, "p_429": 0.2},
)


def scenario_provider(
    h: Harness, requests: int, *, rng: random.Random, bound: float = 150
) -> Result:
    """A provider that times out (1 s client timeout, held 3 s), resets, answers 429 and 500."""
    result, started = Result("provider timeouts, resets, 429, 500"), time.monotonic()
    pool = [h.spawn("provider-") for _ in range(2)]
    ids: list[int] = []
    for i in range(requests):
        mix = PROVIDER_MIXES[i % len(PROVIDER_MIXES)]
        ids += h.new_requests(1, latency=0.05, timeout=1.0, hang=3.0, retry_after_ms=50, **mix)
        result.trials += 1
    result.violations += h.wait_finished(ids, bound)
    result.violations += h.check_safety(ids)
    stats = h.client.stats()["outcomes"]
    result.faults = sum(stats.get(k, 0) for k in ("timeout", "reset", "429", "500"))
    result.note = "mixes: " + "; ".join(
        ",".join(f"{k[2:]}={v:g}" for k, v in m.items()) for m in PROVIDER_MIXES
    )
    result = h.finish(result, ids, bound=bound, started=started, completed=False)
    h.retire(pool)
    return result


APPROVAL_POINTS = ("approval_claimed", "approval_ran")


def scenario_approvals(
    h: Harness,
    trials: int,
    *,
    rng: random.Random,
    bound: float = 120,
    action: str = "file.write",
) -> Result:
    """A member's every ``action`` — a document write (``file.write``), or a call of the
    destructive tool of the harness's MCP server (``h.mcp``, bench/fault_mcp.py) on a record
    of its own — waits for approval; the harness decides each as it appears (approve, now and
    then reject). Each trial's worker SIGKILLs itself right after it claims an approved action,
    or after the action ran and before its result is recorded; a new worker and the sweeper
    carry on. The action must run at most once (never when rejected), its result be recorded
    once (an honest "outcome unknown", for the agent and in an activity line, when the worker
    died with it), no approval stay pending on a finished request, and every request
    complete."""
    mcp = action == AGENT_TOOL
    name = "SIGKILL around approved MCP tool calls" if mcp else "SIGKILL around approved actions"
    result, started = Result(name), time.monotonic()
    ids: list[int] = []
    deadline = time.monotonic() + max(60.0, trials * 15.0)
    while result.trials < trials and time.monotonic() < deadline:
        point = APPROVAL_POINTS[result.trials % len(APPROVAL_POINTS)]
        batch = h.new_requests(1, latency=0.02, action=action)
        ids += batch
        worker = h.spawn(
            f"approve-{point}-", {"GARDEN_FAULT_POINT": point, "GARDEN_FAULT_PROBABILITY": "1"}
        )
        until = time.monotonic() + 30
        while worker.alive and h.unfinished(batch) and time.monotonic() < until:
            h.decide_pending(batch, rng)
            time.sleep(0.05)
        worker.wait_exit(5)
        _end_trial(h, result, worker, ids)
    if result.trials < trials:
        result.violations.append(f"only {result.trials} of {trials} trials ran before the deadline")
    result = h.finish(
        result, ids, bound=bound, started=started, tick=lambda: h.decide_pending(ids, rng)
    )
    result.violations += db_retry(lambda: unknown_outcome_violations(ids, killed=result.faults))
    result.note = (
        "killed right after the claim, or after the action ran and before its result was "
        "recorded; about 1 in 10 approvals rejected"
    )
    if mcp:
        calls = h.mcp_calls(ids)
        result.details.update(calls)
        result.note = (
            f"each call of {AGENT_TOOL} (destructive: approval by its annotations) on a record "
            f"of its own, served in the harness process; killed right after the claim, or after "
            f"the call and before its result was recorded; {calls['approved']} approved, "
            f"{calls['rejected']} rejected; the server received {calls['calls']} calls; "
            f"{calls['unknown']} outcomes unknown, {calls['unknown_called']} of them after the "
            "call reached the server"
        )
    return result
