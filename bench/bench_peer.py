"""A peer of garden's step, measured on the same machine: LangGraph's durable step.

A StateGraph whose one node appends a ~500-byte turn (speaker and text) to the room's list of
turns, compiled with LangGraph's PostgreSQL checkpointer (``PostgresSaver``): each ``invoke``
is one step, and with ``durability="sync"`` its checkpoint is written before the invoke
returns, as garden's turn is committed before its next call is enqueued. The peer runs in one
process with no fence and no lock between processes, and reads back only its own state;
garden's worker CPU per call divided by this step's CPU (bench/peer_ratio.py) says what
garden's fence, lock, projection and Celery hop cost beyond such a step.

Measured per durability mode: a conversation alone (one thread, its steps one after another,
as bench_loop.py's overhead is measured), then ``--threads`` conversations at once, each of
``--steps`` invokes (garden's 12 calls of a request), ``--rounds`` times. Per step: wall time
(p50, p95), process CPU (``time.process_time``, every thread of this process, not
PostgreSQL's) and SQL statements sent (counted by the cursor class the pool hands out).

Run (in the peer's own venv, see ``make bench-peer``; it imports neither Django nor garden):
    python bench/bench_peer.py [--threads 20] [--steps 12] [--rounds 3] [--alone 20]
        [--durability sync async] [--json PATH]
Uses its own database, PEER_DATABASE_URL (default garden_peer on 127.0.0.1), created if
missing; its checkpoint tables are emptied at the start so every run starts from the same size.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import platform
import statistics
import threading
import time
import uuid
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, TypedDict

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

DATABASE_URL = os.environ.get("PEER_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/garden_peer")
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
# About the size of the floor step's turn in bench/diagnostics.py.
TURN_TEXT = ("A figure, a question and a short answer about the rent. " * 9)[:500]
PACKAGES = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres", "psycopg")


class Room(TypedDict):
    speaker: str
    turns: Annotated[list[dict], operator.add]


def take_turn(room: Room) -> dict:
    """The step's work: one turn appended, no model, as garden's zero-latency call."""
    return {"turns": [{"speaker": room["speaker"], "text": TURN_TEXT}]}


class CountingCursor(psycopg.Cursor):
    """Counts the statements sent to PostgreSQL, one per ``execute`` and one per parameter set
    of ``executemany`` (pipelined or not: each is a statement the server runs)."""

    lock = threading.Lock()
    statements = 0

    def execute(self, query, params=None, **kwargs):
        CountingCursor.add(1)
        return super().execute(query, params, **kwargs)

    def executemany(self, query, params_seq, **kwargs):
        params_seq = list(params_seq)
        CountingCursor.add(len(params_seq))
        return super().executemany(query, params_seq, **kwargs)

    @classmethod
    def add(cls, n: int) -> None:
        with cls.lock:
            cls.statements += n


def ensure_database(url: str) -> None:
    """Create the peer's database if missing, connecting to ``postgres`` on the same server."""
    params = conninfo_to_dict(url)
    if params.get("host", "127.0.0.1") not in LOCAL_HOSTS:
        raise SystemExit(f"PEER_DATABASE_URL must point at this machine, not {params['host']}")
    name = params["dbname"]
    with psycopg.connect(make_conninfo(url, dbname="postgres"), autocommit=True) as conn:
        if not conn.execute("select 1 from pg_database where datname = %s", [name]).fetchone():
            conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))


def open_saver(url: str, size: int) -> tuple[ConnectionPool, PostgresSaver, str]:
    """A pool as LangGraph's documentation sets one up for PostgresSaver, its tables created
    and emptied, and the server's version."""
    pool = ConnectionPool(
        url,
        min_size=size,
        max_size=size,
        open=True,
        kwargs={
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            "cursor_factory": CountingCursor,
        },
    )
    saver = PostgresSaver(pool)
    saver.setup()
    with pool.connection() as conn:
        conn.execute("truncate checkpoints, checkpoint_blobs, checkpoint_writes")
        server = conn.execute("show server_version").fetchone()["server_version"].split()[0]
    return pool, saver, server


def conversation(graph, durability: str, steps: int, walls: list[float]) -> None:
    """``steps`` invokes on one fresh thread of the graph, each one durable step."""
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    for i in range(steps):
        t0 = time.perf_counter()
        graph.invoke({"speaker": f"member{i % 3}"}, config, durability=durability)
        walls.append((time.perf_counter() - t0) * 1000)


def measure(graph, durability: str, *, threads: int, steps: int, rounds: int) -> dict:
    """``rounds`` times, ``threads`` conversations at once of ``steps`` steps each."""
    walls: list[float] = []
    statements0, cpu0 = CountingCursor.statements, time.process_time()
    for _ in range(rounds):
        per_thread: list[list[float]] = [[] for _ in range(threads)]
        workers = [
            threading.Thread(target=conversation, args=(graph, durability, steps, w))
            for w in per_thread
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        for w in per_thread:
            walls += w
    cpu = time.process_time() - cpu0
    n = len(walls)
    if n != threads * steps * rounds:
        raise SystemExit(f"{threads * steps * rounds - n} steps failed (see the traceback above)")
    return {
        "threads": threads,
        "steps": n,
        "wall_ms_p50": statistics.median(walls),
        "wall_ms_p95": pct(walls, 0.95),
        "cpu_ms_per_step": cpu / n * 1000,
        "statements_per_step": (CountingCursor.statements - statements0) / n,
    }


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description="LangGraph's durable step, as garden's peer.")
    parser.add_argument("--threads", type=int, default=20, help="conversations at once")
    parser.add_argument("--steps", type=int, default=12, help="invokes per conversation")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--alone", type=int, default=20, help="conversations run alone")
    parser.add_argument(
        "--durability",
        nargs="+",
        default=["sync", "async"],
        choices=["sync", "async", "exit"],
        help="modes to measure; the JSON's headline figures are the first one's",
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()

    ensure_database(DATABASE_URL)
    pool, saver, server = open_saver(DATABASE_URL, size=min(args.threads, 8))
    try:
        builder = StateGraph(Room)
        builder.add_node("take_turn", take_turn)
        builder.add_edge(START, "take_turn")
        builder.add_edge("take_turn", END)
        graph = builder.compile(checkpointer=saver)
        versions = {name: version(name) for name in PACKAGES}
        print(
            f"machine: {platform.node()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}, PostgreSQL {server}, "
            + ", ".join(f"{k} {v}" for k, v in versions.items())
        )
        # Warm-up: imports, the pool's connections and their prepared statements.
        for _ in range(3):
            conversation(graph, args.durability[0], args.steps, [])
        modes: dict[str, dict] = {}
        for mode in args.durability:
            alone = measure(graph, mode, threads=1, steps=args.steps, rounds=args.alone)
            together = measure(
                graph, mode, threads=args.threads, steps=args.steps, rounds=args.rounds
            )
            modes[mode] = {**together, "alone": alone}
    finally:
        pool.close()

    print(
        f"\nLangGraph's durable step: one node appending a ~500-byte turn, PostgresSaver, "
        f"{args.steps} invokes per conversation; CPU = this process, every thread"
    )
    print(
        "| durability | conversations at once | steps | wall p50 / p95 | CPU per step | statements per step |"
    )
    print("|---|---|---|---|---|---|")
    for mode, figures in modes.items():
        for row in (figures["alone"], figures):
            print(
                f"| {mode} | {row['threads']} | {row['steps']} | {row['wall_ms_p50']:.2f} / "
                f"{row['wall_ms_p95']:.2f} ms | {row['cpu_ms_per_step']:.2f} ms | "
                f"{row['statements_per_step']:.1f} |"
            )
    if args.json:
        head = args.durability[0]
        report = {
            "peer": "langgraph",
            "versions": {**versions, "python": platform.python_version(), "postgresql": server},
            "durability": head,
            "steps_per_conversation": args.steps,
            **modes[head],
            "modes": modes,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nfigures written to {args.json}")


if __name__ == "__main__":
    main()
