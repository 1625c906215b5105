"""Orchestration overhead of the group loop on PostgreSQL + Redis + real worker processes.

With a zero-latency model, the time between one reservation of a request and the next is the
loop's own cost per model call: the Celery hop, the lock, the fence claim, the projection, the
reservation, the record and the enqueue. Two zero-latency models are measured: the offline
``scripted`` provider (no I/O at all) and the ``openai`` adapter against bench/fake_provider.py
answering at once (the real HTTP path). Measured in the same run for comparison: a bare
Celery hop (a task that enqueues the next), the floor step of ARCHITECTURE.md (hop + group
lock + the request row locked with a ~500-byte turn appended; the loop's goal is within twice
that), the PostgreSQL and Redis round trips, and the queries one step makes.

Run: python bench/bench_loop.py [--groups 40] [--workers 1 2] [--json PATH]

``--json PATH`` also writes the figures of the first worker count as JSON (the step-cost
targets are ratios within that one file): the floor step, the bare hop, per model the
overhead, CPU and statements per step, the overhead in a thread of 10 and of 2,000
earlier turns, and the 1:1 step's overhead beside the group step's (``one_to_one``: a
scripted agent in its own room whose every working call runs a tool).
Needs PostgreSQL and Redis (DATABASE_URL / REDIS_URL, else the local defaults); uses its own
database ``garden_bench`` and Redis db 2 (env BENCH_DATABASE, BENCH_REDIS_URL) so it never
touches other data. Workers run the threads pool with GARDEN_DB_POOL_MAX=4, as the deployment
does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.loop_measures import (
    bare_hops,
    chained,
    reservation_gaps,
    seed_thread,
    wait_finished,
    with_cpu,
)
from bench.seeding import build_group
from bench.support import (
    PgProbe,
    ensure_database,
    machine_line,
    pct,
    round_trips,
    step_queries,
    use_services,
)
from bench.workers import DEPLOYED_ENV, Worker, cpu_seconds

DATABASE = os.environ.get("BENCH_DATABASE", "garden_bench")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/2")
LONG_THREAD_CAP = 400_000
ASK = {"name": "group.ask", "arguments": {"member": "ledger", "request": "One more figure."}}


def scripted_groups(n: int, tag: str) -> list:
    from django.contrib.auth import get_user_model

    from tests.groups.conftest import make_group

    user, _ = get_user_model().objects.get_or_create(username=f"bench-{tag}-{time.time_ns()}")
    return [
        make_group(
            user,
            name=f"g{i}",
            members={"ledger": [{"reply": "A figure."}]},
            concierge_rules=[
                {"when": "consolidated answer", "reply": "Final."},
                {"reply": {"text": "More.", "tool_calls": [ASK]}},
            ],
        )
        for i in range(n)
    ]


def openai_groups(n: int, tag: str, provider_url: str) -> list:
    from bench.fake_provider import FakeProviderClient

    client = FakeProviderClient(provider_url)
    stamp = time.time_ns()
    return [
        build_group(username=f"bench-{tag}-{i}-{stamp}", base_url=client.base_url(f"{tag}{i}"))
        for i in range(n)
    ]


def overhead(group, probe: PgProbe, runs: int = 5) -> list[float]:
    """Gaps between consecutive reservations of one request running alone, in ms."""
    from groups.services.requests import request_create

    gaps: list[float] = []
    for _ in range(runs):
        request = request_create(group=group, text="Keep digging.")
        wait_finished(probe, [request.pk])
        gaps += reservation_gaps(request.pk)
    return gaps


def scripted_agents(n: int, tag: str) -> list:
    """``n`` 1:1 conversations, each with a scripted agent that looks something up
    (memory.recall) on every working call and answers on the reserved one: twelve calls a
    request, as a group's 12-call request has."""
    from django.contrib.auth import get_user_model

    from garden.models import Conversation
    from garden.services.agents import agent_create
    from tests.groups.conftest import scripted

    user, _ = get_user_model().objects.get_or_create(username=f"bench-{tag}-{time.time_ns()}")
    recall = {"name": "memory.recall", "arguments": {"query": "rent"}}
    chats = []
    for i in range(n):
        agent = agent_create(
            owner=user,
            handle=f"a{i}",
            name=f"Agent {i}",
            model_account=scripted(
                user,
                f"a{i}",
                [
                    {"when": "your answer now", "reply": "Final."},
                    {"reply": {"text": "Looking.", "tool_calls": [recall]}},
                ],
            ),
            enabled_tools=["memory.recall"],
        )
        chats.append(Conversation.objects.create(owner=user, agent=agent))
    return chats


def solo_overhead(conversation, probe: PgProbe, runs: int = 5) -> list[float]:
    """Gaps between consecutive reservations of one 1:1 request running alone, in ms."""
    from groups.services.requests import conversation_request_create

    gaps: list[float] = []
    for _ in range(runs):
        request = conversation_request_create(
            owner=conversation.owner, conversation=conversation, text="Keep digging."
        )
        wait_finished(probe, [request.pk])
        gaps += reservation_gaps(request.pk)
    return gaps


def thread_overheads(
    make,
    probe: PgProbe,
    lengths: tuple[int, ...],
    runs: int = 4,
    *,
    cap: int | None = LONG_THREAD_CAP,
) -> list[list]:
    """Reservation gaps of requests in threads that already hold each of ``lengths`` turns,
    the lengths taken in turn run after run (so a drift of the machine's speed reaches them
    alike); a fresh group per run, so no run reads a thread an earlier one rolled over.
    ``cap``: the groups' room cap (None: the default cap, which carries only the newest turns
    of a long thread)."""
    from groups.services.requests import request_create

    gaps: list[list[float]] = [[] for _ in lengths]
    for i in range(runs):
        for turns, into in zip(lengths, gaps, strict=True):
            group = make(1, f"t{turns}-{i}-{cap}")[0]
            if cap is not None:
                # A cap that carries the whole thread (at the default cap it would have rolled
                # over long before), the same for the short thread, so both project every turn.
                group.room_cap_chars = cap
                group.save(update_fields=["room_cap_chars"])
            # At the default cap only a whole room's turns can be dropped whole: the room
            # context between an agent's own turns is one message of the projection.
            seed_thread(group, turns, whole_room=cap is None)
            request = request_create(group=group, text="Keep digging.")
            wait_finished(probe, [request.pk])
            into += reservation_gaps(request.pk)
    return gaps


def throughput(groups: list, probe: PgProbe, workers: list[Worker]) -> tuple[float, float]:
    """Every group at once: calls/s, and worker CPU ms per call."""
    from groups.models import CallReservation
    from groups.services.requests import request_create

    cpu0 = sum(cpu_seconds(w.pid) for w in workers)
    t0 = time.perf_counter()
    ids = [request_create(group=g, text="Keep digging.").pk for g in groups]
    wait_finished(probe, ids)
    wall = time.perf_counter() - t0
    cpu = sum(cpu_seconds(w.pid) for w in workers) - cpu0
    calls = CallReservation.objects.filter(request_id__in=ids).count()
    return calls / wall, cpu / calls * 1000


def floor_steps(app, n: int) -> list[float]:
    """The floor step (bench.floor_step): hop + group lock + the request row
    locked in a transaction with a ~500-byte turn appended, n times in a chain."""
    from groups.models import GroupRequest
    from groups.services.requests import group_conversation_open

    group = scripted_groups(1, "floor")[0]
    conversation = group_conversation_open(group=group)
    request = GroupRequest.objects.create(group=group, conversation=conversation, state="completed")
    return chained(app, "bench.floor_step", [group.pk, request.pk, conversation.pk], n)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Orchestration overhead per model call vs a bare Celery hop."
    )
    parser.add_argument("--groups", type=int, default=40)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--hops", type=int, default=300)
    parser.add_argument("--threads", type=int, default=8, help="threads per worker")
    parser.add_argument("--json", type=Path, help="write the first worker count's figures here")
    parser.add_argument(
        "--long-thread", type=int, default=2000, help="earlier turns of the long-thread run"
    )
    parser.add_argument(
        "--capped-thread",
        type=int,
        default=10_000,
        help="earlier turns of the long thread at the default room cap (0: not run)",
    )
    args = parser.parse_args()
    report: dict = {}

    use_services(database=DATABASE, redis_url=REDIS_URL)
    ensure_database(DATABASE)
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    from bench.bench_load import start_fake_provider

    provider, url = start_fake_provider(0.0)
    try:
        import django

        django.setup()
        from django.db import connections

        from config.celery import app

        print(machine_line())
        print(round_trips())
        for name, group in (
            ("scripted", scripted_groups(1, "q")[0]),
            ("openai", openai_groups(1, "q", url)[0]),
        ):
            counts = step_queries(group)
            report[name] = {
                "queries_per_step_median": statistics.median(counts),
                "queries_per_step_max": max(counts),
            }
            print(
                f"queries per step ({name}): median {statistics.median(counts):.0f}, max {max(counts)} "
                f"({len(counts)} steps of a 12-call request)"
            )
        connections.close_all()
        print(
            f"\nzero-latency models; overhead = time from one reservation of a request to the next, "
            f"the request alone; throughput = {args.groups} groups at once"
        )
        print(
            "| workers x threads | bare Celery hop p50 / p95 | floor step p50 / p95 | model "
            "| loop overhead per call p50 / p95 | x floor step (p50) | % of a 500 ms call (p50) "
            "| throughput | worker CPU per call |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        cpu_rows: list[tuple] = []
        for workers in args.workers:
            env = {**DEPLOYED_ENV, "GARDEN_LOG_LEVEL": "ERROR", "GARDEN_DB_POOL_MAX": "4"}
            started = [
                Worker(
                    pool="threads",
                    concurrency=args.threads,
                    env=env,
                    name=f"loop{workers}-",
                    log_path=Path("/tmp") / f"bench-loop-{workers}-{i}.log",
                )
                for i in range(workers)
            ]
            probe = PgProbe(DATABASE)
            try:
                time.sleep(2.0)
                bare_hops(app, 20)  # warm-up: the first tasks a worker runs pay its imports
                hop, hop_cpu = with_cpu(started, lambda: bare_hops(app, args.hops))
                floor, floor_cpu = with_cpu(started, lambda: floor_steps(app, args.hops))
                cpu_rows.append((workers, hop_cpu / len(hop), floor_cpu / len(floor)))
                rows = []
                for name, make in (
                    ("scripted", lambda n, t: scripted_groups(n, t)),
                    ("openai", lambda n, t: openai_groups(n, t, url)),
                ):
                    group = make(1, f"solo{workers}{name}")[0]
                    gaps, solo_cpu = with_cpu(started, lambda g=group, p=probe: overhead(g, p))
                    cpu_rows[-1] += (name, solo_cpu / len(gaps))
                    if workers == args.workers[0]:
                        short, long = thread_overheads(make, probe, (10, args.long_thread))
                        if args.capped_thread:
                            capped = thread_overheads(
                                make, probe, (10, args.capped_thread), runs=3, cap=None
                            )
                            report[name].update(
                                overhead_p50_ms_capped_short_thread=statistics.median(capped[0]),
                                overhead_p50_ms_capped_long_thread=statistics.median(capped[1]),
                            )
                        report[name].update(
                            overhead_p50_ms=statistics.median(gaps),
                            overhead_p95_ms=pct(gaps, 0.95),
                            cpu_per_call_ms=solo_cpu / len(gaps),
                            overhead_p50_ms_short_thread=statistics.median(short),
                            overhead_p50_ms_long_thread=statistics.median(long),
                        )
                    rate, cpu = throughput(
                        make(args.groups, f"load{workers}{name}"), probe, started
                    )
                    rows.append((name, gaps, rate, cpu))
                if workers == args.workers[0]:
                    # The same loop for one agent: a 1:1 request's step beside a group's.
                    chat = scripted_agents(1, f"chat{workers}")[0]
                    solo = solo_overhead(chat, probe)
                    report["one_to_one"] = {
                        "overhead_p50_ms": statistics.median(solo),
                        "overhead_p95_ms": pct(solo, 0.95),
                        "group_overhead_p50_ms": report["scripted"]["overhead_p50_ms"],
                    }
            finally:
                for w in started:
                    w.stop()
                probe.close()
                connections.close_all()
            hop50, floor50 = statistics.median(hop), statistics.median(floor)
            if workers == args.workers[0]:
                report.update(
                    workers=workers,
                    threads=args.threads,
                    bare_hop_p50_ms=hop50,
                    floor_step_p50_ms=floor50,
                    floor_cpu_per_step_ms=cpu_rows[0][2],
                    long_thread_turns=args.long_thread,
                    capped_thread_turns=args.capped_thread,
                )
            for name, gaps, rate, cpu in rows:
                med = statistics.median(gaps)
                print(
                    f"| {workers} x {args.threads} | {hop50:.2f} / {pct(hop, 0.95):.2f} ms | "
                    f"{floor50:.2f} / {pct(floor, 0.95):.2f} ms | {name} | "
                    f"{med:.2f} / {pct(gaps, 0.95):.2f} ms | {med / floor50:.1f}x | {med / 5:.2f}% | "
                    f"{rate:.0f} calls/s | {cpu:.1f} ms |",
                    flush=True,
                )
        print("\nworker CPU (all workers, user + system) per link of each chain, run alone")
        print(
            "| workers | bare Celery hop | floor step | loop call, scripted | loop call, openai |"
        )
        print("|---|---|---|---|---|")
        for workers, hop_ms, floor_ms, _, scripted_ms, _, openai_ms in cpu_rows:
            print(
                f"| {workers} | {hop_ms:.1f} ms | {floor_ms:.1f} ms | {scripted_ms:.1f} ms | "
                f"{openai_ms:.1f} ms |"
            )
        print_thread_lengths(report)
        solo = report.get("one_to_one")
        if solo:
            print(
                "\nthe 1:1 step (a scripted agent in its own room, a memory.recall each working "
                f"call) beside the group step (scripted), {args.workers[0]} worker(s): "
                f"p50 {solo['overhead_p50_ms']:.2f} ms vs {solo['group_overhead_p50_ms']:.2f} ms "
                f"({solo['overhead_p50_ms'] / solo['group_overhead_p50_ms']:.2f}x), "
                f"p95 {solo['overhead_p95_ms']:.2f} ms"
            )
        if args.json:
            args.json.write_text(json.dumps(report, indent=2) + "\n")
            print(f"\nfigures written to {args.json}")
    finally:
        provider.terminate()
        provider.wait(5)


def print_thread_lengths(report: dict) -> None:
    if "overhead_p50_ms_long_thread" not in report.get("scripted", {}):
        return
    turns = report["long_thread_turns"]
    print(
        f"\nloop overhead per call (p50) by the thread's earlier turns, {report['workers']} worker"
    )
    print(f"| model | 10 turns | {turns} turns | {turns} / 10 |")
    print("|---|---|---|---|")
    for name in ("scripted", "openai"):
        short = report[name]["overhead_p50_ms_short_thread"]
        long = report[name]["overhead_p50_ms_long_thread"]
        print(f"| {name} | {short:.2f} ms | {long:.2f} ms | {long / short:.2f}x |")
    if "overhead_p50_ms_capped_long_thread" not in report["scripted"]:
        return
    turns = report["capped_thread_turns"]
    print(f"\nthe same at the default room cap: 10 turns vs {turns}")
    print(f"| model | 10 turns | {turns} turns | {turns} / 10 |")
    print("|---|---|---|---|")
    for name in ("scripted", "openai"):
        short = report[name]["overhead_p50_ms_capped_short_thread"]
        long = report[name]["overhead_p50_ms_capped_long_thread"]
        print(f"| {name} | {short:.2f} ms | {long:.2f} ms | {long / short:.2f}x |")


if __name__ == "__main__":
    main()
