"""Fault harness: crash, pause and cut real worker processes, Redis and PostgreSQL under live
group requests, and check the loop's invariants from the database after every trial.

Scenarios (all on loopback, against the ``openai`` adapter and bench/fake_provider.py):

- SIGKILL a worker at five points of a step: before the reservation, after it (before the
  dispatch), during the model call, after the reply (before the write), after the write
  (before the enqueue). Four points are groups.faults.fault_point calls in the coordinator;
  "during the call" is a SIGKILL from here while the provider holds the worker's request.
- SIGSTOP a worker inside a model call past its lock TTL, let another worker take the step
  over (the sweeper re-enqueues it by fence), then SIGCONT: the stale step must never write.
- Restart Redis (broker and locks; it keeps nothing on disk) and terminate every PostgreSQL
  backend of the harness database, during requests: they must resume or end honestly.
- A provider that times out, resets, answers 429 and 500, in random mixes.
- A member whose every document write waits for approval, decided from here as it appears:
  the worker SIGKILLs itself right after it claims an approved action, or after the action ran
  and before its result is recorded. The same with a destructive tool of an owner's MCP server
  (bench/fault_mcp.py, served from this process, counting the calls it received per record).

Recovery from lost tasks comes from the sweeper (groups.services.approvals.sweep_stranded), run
here every 0.5 s on requests quiet for 3 s (> the harness lock TTL of 2 s > any live step).

Invariants, per request: reservations within 11 working + 1 synthesis + 1 maintenance and
equal to the row's counters; reservations not released, plus those released for a confirmed
rejection, >= the HTTP requests the provider received for it; exactly one owner message; no
duplicated turn (request, speaker, step) or contribution (same ask answered twice); fences
strictly increasing over reservations and steps non-decreasing over seq; no pending approval on
a finished request; one conclusion (the coordinator's tool-less turn) at most; each approved
action run at most once (its document counted when the tool ended, its MCP call by the
server), never when rejected or unclaimed, its result recorded once, an MCP call recorded as
done only if the server received it, and no call the server received that no approval asked
for; after the approval scenarios, an honest "outcome unknown" (for the agent and in an
activity line) for each action whose worker died with it; and, within a bound, every request
completed (stopped or failed with an outcome code only where the fault is the provider's).

Run: python bench/faults.py [--trials 200] [--only kill,stop,approvals,mcp,redis,pg,provider]
     [--shared-redis] [--pgbouncer] [--seed N]
Uses its own database ``garden_faults`` (env FAULTS_DATABASE); starts its own redis-server on a
free port (db 4, env FAULTS_REDIS_DB), so its Redis restarts never touch the shared one.
``--shared-redis`` uses and restarts the Redis on 127.0.0.1:6379 instead: only when nothing else
needs it.

``--pgbouncer`` runs every scenario behind a transaction pooler: a PgBouncer of its own
(Debian's package, bench/fault_pooler.py) in ``pool_mode = transaction`` on a free loopback port
in front of the PostgreSQL server, which the workers and the harness's own queries (flush,
requests, the sweeper, the checks) go through with GARDEN_DB_TRANSACTION_POOLER=1. The
idle-in-transaction timeout is then set on the harness database itself (and as PgBouncer's
``idle_transaction_timeout``), taken off again at the end; creating and migrating the database,
and the ``pg`` scenario's terminating of backends (PgBouncer's server sessions then), go to the
server directly.

This file is the command line. The rest is in bench/fault_processes.py (workers, Redis,
PostgreSQL backends), fault_harness.py (requests, sweeper, checks after a trial),
fault_invariants.py, fault_scenarios.py, fault_mcp.py and fault_report.py.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fault_harness import SWEEP_AGE, SWEEP_INTERVAL, Harness
from bench.fault_mcp import AGENT_TOOL, Tracker
from bench.fault_pooler import pgbouncer_server
from bench.fault_processes import (
    IDLE_IN_TRANSACTION,
    LOCK_TTL,
    REDIS_DB,
    RedisServer,
    Zygote,
    idle_timeout_on_database,
    worker_env,
    zygote_main,
)
from bench.fault_report import Result, progress, summary
from bench.fault_scenarios import (
    POINTS,
    scenario_approvals,
    scenario_kill,
    scenario_pg,
    scenario_provider,
    scenario_redis,
    scenario_stop,
)
from bench.support import ROOT, ensure_database, machine_line, pg_base, use_services

# Overridable, so that two runs on one machine never share (or flush) one database.
DATABASE = os.environ.get("FAULTS_DATABASE", "garden_faults")
# PgBouncer's server sessions for the harness database (--pgbouncer): fewer than the clients
# (seven workers of four threads, and the harness), as a pooler is sized.
POOL_SIZE = 20


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Fault harness for the group loop (see the module docstring)."
    )
    parser.add_argument(
        "--trials",
        type=int,
        default=200,
        help="SIGKILL trials (split over the five points); the other scenarios scale with it",
    )
    parser.add_argument("--only", default="kill,stop,approvals,mcp,redis,pg,provider")
    parser.add_argument(
        "--shared-redis",
        action="store_true",
        help=f"use and restart the Redis on 127.0.0.1:6379 (db {REDIS_DB}) instead of a private one",
    )
    parser.add_argument(
        "--pgbouncer",
        action="store_true",
        help="run the workers and the harness's own queries through a PgBouncer of its own in "
        "transaction mode (GARDEN_DB_TRANSACTION_POOLER=1)",
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--zygote", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.zygote:
        zygote_main()
        return
    with ExitStack() as stack:
        run(args, stack)


def behind_pgbouncer(stack: ExitStack, server: str) -> str:
    """A PgBouncer in transaction mode in front of ``server`` (closed with ``stack``), the
    harness database's idle timeout set on the database for its server sessions (taken off
    again with ``stack``); returns the database's URL through it."""
    parts = urlsplit(server)
    user = parts.username or "postgres"
    idle_timeout_on_database(DATABASE, server=server, seconds=IDLE_IN_TRANSACTION)
    stack.callback(idle_timeout_on_database, DATABASE, server=server, seconds=None)
    port = stack.enter_context(
        pgbouncer_server(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 5432,
            user=user,
            idle_transaction_timeout=IDLE_IN_TRANSACTION,
            pool_size=POOL_SIZE,
        )
    )
    print(
        f"PostgreSQL: through a PgBouncer of its own on 127.0.0.1:{port} (pool_mode transaction, "
        f"{POOL_SIZE} server sessions, idle_transaction_timeout {IDLE_IN_TRANSACTION} s; the "
        f"database's idle_in_transaction_session_timeout {IDLE_IN_TRANSACTION} s)"
    )
    return f"postgres://{user}@127.0.0.1:{port}/{DATABASE}"


def run(args: argparse.Namespace, stack: ExitStack) -> None:
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    only = set(args.only.split(","))
    redis = RedisServer(shared=args.shared_redis)
    # The PostgreSQL server itself, whatever the workers go through.
    server = pg_base()
    use_services(database=DATABASE, redis_url=redis.url)
    ensure_database(DATABASE)
    database_url = f"{server}/{DATABASE}"
    if args.pgbouncer:
        database_url = behind_pgbouncer(stack, server)
        os.environ.update(DATABASE_URL=database_url, GARDEN_DB_TRANSACTION_POOLER="1")
    env = worker_env(database_url, redis.url, pooler=args.pgbouncer)
    subprocess.run([sys.executable, "manage.py", "flush", "--noinput"], cwd=ROOT, check=True)
    import django

    django.setup()
    from bench.fake_provider import FakeProvider

    provider = FakeProvider(seed=seed).start()
    log_dir = Path(tempfile.mkdtemp(prefix="garden-faults-"))
    zygote = Zygote(log_dir, env)
    h = Harness(provider_url=provider.url, spawn=zygote.spawn)
    h.mcp = Tracker().start()
    print(machine_line())
    print(f"seed {seed}; database {DATABASE}; worker logs in {log_dir}")
    if redis.shared:
        print(
            f"Redis: the SHARED redis-server on 127.0.0.1:6379, db {REDIS_DB} — restarting it wipes "
            "every db: run this only when nothing else needs Redis."
        )
    else:
        print(
            f"Redis: a private redis-server on 127.0.0.1:{redis.port}, db {REDIS_DB} (the shared one "
            "is never touched)."
        )
    print(
        f"workers: threads pool, {h.concurrency} threads, lock TTL {LOCK_TTL} s; sweeper every "
        f"{SWEEP_INTERVAL} s on requests quiet for {SWEEP_AGE} s",
        flush=True,
    )
    results: list[Result] = []

    def done(result: Result) -> None:
        if h.one_to_one:
            result.scenario += " (1:1)"
        results.append(result)
        progress(result)

    h.start_sweeper()
    try:
        # Every scenario on groups' requests, then on messages to one agent (1:1), whose
        # requests run on the same loop.
        for one_to_one in (False, True):
            h.one_to_one = one_to_one
            if "kill" in only:
                per_point = max(1, args.trials // len(POINTS))
                for point in POINTS:
                    done(scenario_kill(h, point, per_point, rng=rng))
            if "stop" in only:
                done(scenario_stop(h, max(1, args.trials // 2), rng=rng))
            if "approvals" in only:
                done(scenario_approvals(h, max(2, args.trials // 10), rng=rng))
            if "mcp" in only:
                done(scenario_approvals(h, max(2, args.trials // 10), rng=rng, action=AGENT_TOOL))
            if "redis" in only:
                done(scenario_redis(h, redis, max(2, args.trials // 40), rng=rng))
            if "pg" in only:
                done(scenario_pg(h, DATABASE, max(2, args.trials // 20), rng=rng, server=server))
            if "provider" in only:
                done(scenario_provider(h, max(8, args.trials // 5), rng=rng))
    finally:
        h.stop_sweeper()
        h.stop_workers()
        zygote.close()
        provider.stop()
        h.mcp.stop()
        redis.close()
    violations = summary(results, sweep_errors=h.sweep_errors)
    sys.exit(1 if violations else 0)


if __name__ == "__main__":
    main()
