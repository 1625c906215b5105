"""Load: G groups at once, each with one 12-call request (11 working + 1 synthesis), every
agent on the ``openai`` adapter against a simulated provider with a fixed latency.

Reports, per worker count: model calls in flight (max and time-weighted mean, from the fake
provider's gauge), calls/s, p50/p95 request completion time against the ideal (12 x latency),
database connections in use (sampled from pg_stat_activity), worker memory (RSS of each worker
and its children), and the queries one step makes.

Run: python bench/bench_load.py [--groups 200] [--latency 1.0] [--workers 1 2]
     [--pool threads] [--concurrency 0 (auto)] [--db-pool-max 8]
Needs PostgreSQL and Redis; uses its own database ``garden_bench`` and Redis db 2 (env
BENCH_DATABASE, BENCH_REDIS_URL).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.loop_measures import wait_finished
from bench.seeding import build_group
from bench.support import (
    ROOT,
    PgProbe,
    ensure_database,
    machine_line,
    pct,
    step_queries,
    use_services,
)
from bench.workers import DEPLOYED_ENV, Worker, cpu_seconds, rss_bytes

DATABASE = os.environ.get("BENCH_DATABASE", "garden_bench")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/2")


def start_fake_provider(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "fake_provider.py"), "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise SystemExit("the fake provider did not start")
    return proc, url


class Sampler(threading.Thread):
    """Samples DB connections and worker RSS every ``interval`` seconds until stopped."""

    def __init__(self, probe: PgProbe, workers: list[Worker], interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.probe, self.workers, self.interval = probe, workers, interval
        self.conns: list[int] = []
        self.busy: list[int] = []
        self.rss: dict[str, int] = {}
        self.threads: dict[str, int] = {}
        self.redis_clients: list[int] = []
        self._halt = threading.Event()

    def run(self) -> None:
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        tick = 0
        while not self._halt.wait(self.interval):
            open_, busy = self.probe.connections()
            self.conns.append(open_)
            self.busy.append(busy)
            tick += 1
            if tick % 5 == 0:
                # Every client of the Redis server (this sampler and the bench included).
                self.redis_clients.append(int(client.info("clients")["connected_clients"]))
                for w in self.workers:
                    self.rss[w.name] = max(self.rss.get(w.name, 0), rss_bytes(w.pid))
                    self.threads[w.name] = max(self.threads.get(w.name, 0), _threads(w.pid))

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


def _threads(pid: int) -> int:
    """The threads process ``pid`` runs now (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def queries_per_step(provider_url: str) -> list[int]:
    """Queries of each step of one 12-call request, run in this process against the fake
    provider at zero latency (the same code a worker runs)."""
    from bench.fake_provider import FakeProviderClient

    client = FakeProviderClient(provider_url)
    client.configure(tags={"queries": {"latency": 0.0}})
    group = build_group(username=f"queries-{time.time_ns()}", base_url=client.base_url("queries"))
    counts = step_queries(group)
    request = group.requests.get()
    request.refresh_from_db()
    assert request.state == "completed", (request.state, request.outcome_code)
    return counts


def run(args: argparse.Namespace, workers: int, provider_url: str) -> dict:
    from django.db import connection, connections

    from bench.fake_provider import FakeProviderClient
    from config.celery import app
    from groups.models import GroupRequest
    from groups.services.requests import request_create

    subprocess.run([sys.executable, "manage.py", "flush", "--noinput"], cwd=ROOT, check=True)
    app.control.purge()
    client = FakeProviderClient(provider_url)
    stamp = time.time_ns()
    groups = [
        build_group(username=f"load{workers}-{i}-{stamp}", base_url=client.base_url(f"g{i}"))
        for i in range(args.groups)
    ]
    concurrency = args.concurrency or math.ceil(args.groups / workers) + 4
    env = {**DEPLOYED_ENV, "GARDEN_LOG_LEVEL": "ERROR"}
    if args.db_pool_max:
        env["GARDEN_DB_POOL_MAX"] = str(args.db_pool_max)
    started = [
        Worker(
            pool=args.pool,
            concurrency=concurrency,
            env=env,
            name=f"load{workers}-",
            log_path=Path("/tmp") / f"bench-load-{workers}-{i}.log",
        )
        for i in range(workers)
    ]
    probe = PgProbe(DATABASE)
    with connection.cursor() as cur:
        cur.execute("select pg_backend_pid()")
        probe.exclude.add(cur.fetchone()[0])
    try:
        _wait_ready(app)
        idle_rss = {w.name: rss_bytes(w.pid) for w in started}
        cpu0 = sum(cpu_seconds(w.pid) for w in started)
        sampler = Sampler(probe, started)
        client.reset()
        sampler.start()
        t0 = time.time()
        ids = [request_create(group=g, text="Keep digging.").pk for g in groups]
        created = time.time() - t0
        connections.close_all()
        wait_finished(probe, ids, timeout=max(600, 40 * args.latency * 12))
        stats = client.stats()
        cpu = sum(cpu_seconds(w.pid) for w in started) - cpu0
        sampler.stop()
    finally:
        for w in started:
            w.stop()
        probe.close()
    rows = list(
        GroupRequest.objects.filter(pk__in=ids).values_list(
            "state", "created_at", "finished_at", "working_reserved", "synthesis_reserved"
        )
    )
    durations = [(f - c).total_seconds() for _, c, f, _, _ in rows]
    first = min(c for _, c, _, _, _ in rows)
    last = max(f for _, _, f, _, _ in rows)
    calls = sum(w + s for *_, w, s in rows)
    return {
        "workers": workers,
        "concurrency": concurrency,
        "created_s": created,
        "states": {s: sum(1 for r in rows if r[0] == s) for s in {r[0] for r in rows}},
        "calls": calls,
        "received": stats["received"],
        "wall": (last - first).total_seconds(),
        "p50": statistics.median(durations),
        "p95": pct(durations, 0.95),
        "max": max(durations),
        "max_in_flight": stats["max_in_flight"],
        "mean_in_flight": stats["mean_in_flight"],
        "conns_max": max(sampler.conns or [0]),
        "conns_mean": statistics.fmean(sampler.conns or [0]),
        "busy_max": max(sampler.busy or [0]),
        "busy_mean": statistics.fmean(sampler.busy or [0]),
        "rss": sampler.rss,
        "idle_rss": idle_rss,
        "threads_max": max(sampler.threads.values() or [0]),
        "redis_clients_max": max(sampler.redis_clients or [0]),
        # The memory a call in flight costs a worker: its growth over idle per call it held.
        "rss_per_call_in_flight_kib": statistics.fmean(
            (sampler.rss[n] - idle_rss[n]) / 1024 for n in sampler.rss
        )
        / max(1, stats["max_in_flight"] / workers),
        "cpu_per_call_ms": cpu / max(1, calls) * 1000,
    }


def _wait_ready(app, timeout: float = 60, redis_url: str = REDIS_URL) -> None:
    """Until a diagnostic hop has run: the workers consume."""
    import redis

    key = f"garden:bench:ready:{time.time_ns()}"
    client = redis.Redis.from_url(redis_url)
    app.send_task("bench.diagnostic_hop", args=[1, key])
    deadline = time.monotonic() + timeout
    while not client.llen(key):
        if time.monotonic() > deadline:
            raise SystemExit("workers did not start")
        time.sleep(0.05)
    client.delete(key)
    time.sleep(1.0)  # the other workers finish starting too


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Load: G groups x one 12-call request on a simulated provider."
    )
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--pool", default="threads")
    parser.add_argument(
        "--concurrency", type=int, default=0, help="per worker; 0: groups/workers + 4"
    )
    parser.add_argument(
        "--db-pool-max", type=int, default=8, help="GARDEN_DB_POOL_MAX per worker (0: no pool)"
    )
    parser.add_argument("--json", type=Path, help="write each worker count's figures here")
    args = parser.parse_args()

    use_services(database=DATABASE, redis_url=REDIS_URL)
    ensure_database(DATABASE)
    import redis

    # Its own Redis db: stale locks and tasks of an interrupted run go with it.
    redis.Redis.from_url(REDIS_URL).flushdb()
    provider, url = start_fake_provider(args.latency)
    try:
        import django

        django.setup()
        print(machine_line())
        counts = queries_per_step(url)
        print(
            f"queries per step (openai adapter, zero latency): median {statistics.median(counts):.0f}, "
            f"max {max(counts)}, {len(counts)} steps of a 12-call request"
        )
        ideal = 12 * args.latency
        print(
            f"\n{args.groups} groups x one 12-call request, model latency {args.latency:g} s "
            f"(ideal completion {ideal:g} s), pool={args.pool}, GARDEN_DB_POOL_MAX="
            f"{args.db_pool_max or 'unset'}"
        )
        print(
            "| workers | threads each | calls | calls/s | in flight max / mean | completion p50 / p95 / max "
            "| vs ideal (p50) | DB conns open max / mean, busy max / mean | RSS per worker idle -> peak | worker CPU per call | outcomes |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        results = []
        for workers in args.workers:
            r = run(args, workers, url)
            results.append(r)
            rss = ", ".join(
                f"{r['idle_rss'][n] / 2**20:.0f} -> {v / 2**20:.0f} MiB"
                for n, v in r["rss"].items()
            )
            print(
                f"| {workers} | {r['concurrency']} | {r['calls']} (provider saw {r['received']}) | "
                f"{r['calls'] / r['wall']:.1f} | {r['max_in_flight']} / {r['mean_in_flight']:.1f} | "
                f"{r['p50']:.2f} / {r['p95']:.2f} / {r['max']:.2f} s | {r['p50'] / ideal:.2f}x | "
                f"{r['conns_max']} / {r['conns_mean']:.1f}, {r['busy_max']} / {r['busy_mean']:.1f} | {rss} | {r['cpu_per_call_ms']:.1f} ms | {r['states']} |",
                flush=True,
            )
        for r in results:
            print(
                f"{r['workers']} worker(s): threads per worker at most {r['threads_max']}, "
                f"Redis clients at most {r['redis_clients_max']}, about "
                f"{r['rss_per_call_in_flight_kib']:.0f} KiB of worker memory per call in flight"
            )
        if args.json:
            figures = {
                "groups": args.groups,
                "latency_s": args.latency,
                "ideal_s": ideal,
                "queries_per_step_median": statistics.median(counts),
                "runs": [
                    {**r, "vs_ideal_p50": r["p50"] / ideal, "calls_per_s": r["calls"] / r["wall"]}
                    for r in results
                ],
            }
            args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
            print(f"figures written to {args.json}")
    finally:
        provider.terminate()
        provider.wait(5)


if __name__ == "__main__":
    main()
