"""What watching the loop costs: a step's overhead with tracing and metrics on vs off.

The same zero-latency requests (the ``openai`` adapter against bench/fake_provider.py, the
real HTTP path) run on a
worker started with nothing configured and on one started with tracing on (OTLP/HTTP to a
receiver in this process, on loopback, which counts what it is sent) and metrics on (the
multiprocess directory). The two take turns, round after round, so a drift of the machine's
speed reaches both alike. Overhead per call = time from one reservation of a request to the
next, the request alone; worker CPU per call from /proc.

Run: python bench/bench_observe.py [--rounds 4] [--requests 4] [--json PATH]
Uses its own database ``garden_bench_observe`` and Redis db 3 (env BENCH_OBSERVE_DATABASE,
BENCH_OBSERVE_REDIS_URL). Target: on within 5% of off (p50).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_load import start_fake_provider
from bench.bench_loop import openai_groups, reservation_gaps, wait_finished
from bench.support import PgProbe, ensure_database, machine_line, pct, use_services
from bench.workers import DEPLOYED_ENV, Worker, cpu_seconds

DATABASE = os.environ.get("BENCH_OBSERVE_DATABASE", "garden_bench_observe")
REDIS_URL = os.environ.get("BENCH_OBSERVE_REDIS_URL", "redis://127.0.0.1:6379/3")


class Receiver:
    """An OTLP/HTTP receiver on loopback that accepts every export and counts its bytes."""

    def __init__(self) -> None:
        received = self.received = {"posts": 0, "bytes": 0}

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received["posts"] += 1
                received["bytes"] += len(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()


def observed_env(receiver: Receiver, metrics_dir: str, parts: set[str]) -> dict[str, str]:
    """Tracing and metrics (``parts``) on, as an operator turns them on (docs/operations.md)."""
    env = quiet_env()
    if "traces" in parts:
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_SERVICE_NAME="garden-bench")
    if "metrics" in parts:
        env.update(GARDEN_METRICS_DIR=metrics_dir, PROMETHEUS_MULTIPROC_DIR=metrics_dir)
    return env


def quiet_env() -> dict[str, str]:
    """Nothing configured: the variables an operator's shell might carry are taken away."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "",
        "GARDEN_METRICS_DIR": "",
        "PROMETHEUS_MULTIPROC_DIR": "",
    }


def run_round(env: dict[str, str], groups: list, probe: PgProbe, tag: str) -> tuple[list, float]:
    """Each group's request alone, on a fresh worker with ``env``: reservation gaps (ms) and
    the worker's CPU ms per call."""
    from django.db import connections

    from groups.services.requests import request_create

    worker = Worker(
        pool="threads",
        concurrency=8,
        env={**DEPLOYED_ENV, "GARDEN_LOG_LEVEL": "ERROR", "GARDEN_DB_POOL_MAX": "4", **env},
        name=f"observe-{tag}-",
        log_path=Path("/tmp") / f"bench-observe-{tag}.log",
    )
    try:
        # Warm-up: the worker's first request pays its imports and connections.
        first = request_create(group=groups[0], text="Warm up.")
        wait_finished(probe, [first.pk])
        gaps: list[float] = []
        cpu0 = cpu_seconds(worker.pid)
        for group in groups[1:]:
            request = request_create(group=group, text="Keep digging.")
            wait_finished(probe, [request.pk])
            gaps += reservation_gaps(request.pk)
        cpu = (cpu_seconds(worker.pid) - cpu0) * 1000 / max(len(gaps), 1)
    finally:
        worker.stop()
        connections.close_all()
    return gaps, cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Step overhead with tracing and metrics on vs off."
    )
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=4, help="requests per round")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--on", default="traces,metrics", help="what the 'on' worker has: traces, metrics or both"
    )
    args = parser.parse_args()

    use_services(database=DATABASE, redis_url=REDIS_URL)
    ensure_database(DATABASE)
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    provider, url = start_fake_provider(0.0)
    receiver = Receiver()
    metrics_dir = tempfile.mkdtemp(prefix="garden-bench-metrics-")
    try:
        import django

        django.setup()
        print(machine_line())
        probe = PgProbe(DATABASE)
        parts = set(args.on.split(","))
        off: list[float] = []
        on: list[float] = []
        cpu = {"off": [], "on": []}
        for i in range(args.rounds):
            order = [
                ("off", quiet_env(), off),
                ("on", observed_env(receiver, metrics_dir, parts), on),
            ]
            if i % 2:
                order.reverse()
            for name, env, into in order:
                groups = openai_groups(args.requests + 1, f"{name}{i}-", url)
                gaps, per_call = run_round(env, groups, probe, f"{name}{i}")
                into += gaps
                cpu[name].append(per_call)
        probe.close()
        off50, on50 = statistics.median(off), statistics.median(on)
        cpu_off, cpu_on = statistics.median(cpu["off"]), statistics.median(cpu["on"])
        print(
            f"\nstep overhead, zero-latency openai adapter, 1 worker x 8 threads, "
            f"{args.rounds} rounds of {args.requests} requests each way, taking turns"
        )
        print("| | overhead p50 / p95 | worker CPU per call |")
        print("|---|---|---|")
        print(
            f"| off (nothing configured) | {off50:.2f} / {pct(off, 0.95):.2f} ms | {cpu_off:.1f} ms |"
        )
        print(
            f"| on ({' + '.join(sorted(parts))}) | {on50:.2f} / {pct(on, 0.95):.2f} ms | {cpu_on:.1f} ms |"
        )
        print(
            f"on / off: overhead {on50 / off50:.3f}x (target <= 1.05x), CPU {cpu_on / cpu_off:.3f}x; "
            f"the receiver took {receiver.received['posts']} exports "
            f"({receiver.received['bytes']:,} bytes)"
        )
        if "traces" in parts and receiver.received["posts"] == 0:
            raise SystemExit(
                "tracing was on but nothing was exported: the 'on' run measured nothing"
            )
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "off_p50_ms": off50,
                        "on_p50_ms": on50,
                        "ratio_p50": on50 / off50,
                        "cpu_off_ms": cpu_off,
                        "cpu_on_ms": cpu_on,
                        "exports": receiver.received["posts"],
                    },
                    indent=2,
                )
                + "\n"
            )
    finally:
        receiver.close()
        provider.terminate()
        provider.wait(5)


if __name__ == "__main__":
    main()
