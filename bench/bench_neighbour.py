"""Noisy neighbour: one owner floods a shared site while a second owner works as usual.

The quiet owner sends ordinary requests one after another (the twelve-call scenario:
Concierge asks its member until the working budget is spent, then concludes) and times each
from post to finish.
The same run measures them twice, on the same workers: once alone, once while the flooding
owner keeps every one of its groups busy with
- huge replies: its members' model server streams ``--reply-chars`` characters for calls
  that ask for at most 1,024 tokens;
- slow tools: its other members call ``http.fetch`` on a page that answers after
  ``--tool-seconds``.

It reports the quiet owner's completion time (median, p95) without and with the flood and
their ratio (the target is 1.2x or less), and what the flood's requests ended as.

Run: python bench/bench_neighbour.py [--quiet-requests 8] [--flood-groups 12]
     [--reply-chars 6000000] [--tool-seconds 20] [--latency 0.05] [--concurrency 16]
Needs PostgreSQL and Redis; its own database ``garden_neighbour`` and Redis db 8 (env
BENCH_NEIGHBOUR_DATABASE, BENCH_NEIGHBOUR_REDIS_URL). The site's per-owner limits keep their
defaults: they are what is measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_load import _wait_ready, start_fake_provider
from bench.seeding import build_group
from bench.support import ensure_database, machine_line, pct, use_services
from bench.workers import DEPLOYED_ENV, Worker

DATABASE = os.environ.get("BENCH_NEIGHBOUR_DATABASE", "garden_neighbour")
REDIS_URL = os.environ.get("BENCH_NEIGHBOUR_REDIS_URL", "redis://127.0.0.1:6379/8")

# The fair share under test: the site's own defaults, not the capacity benchmarks' lifted ones.
FAIR_SHARE_ENV = {
    "GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER": "4",
    "GARDEN_MAX_QUEUED_PER_OWNER": "30",
    "GARDEN_MAX_QUEUED_PER_GROUP": "10",
}
FINISHED = ("completed", "stopped", "failed")


def seed(args: argparse.Namespace, provider_url: str, slow_url: str):
    """The quiet owner's group and the flooding owner's groups (half with huge replies, half
    with a slow tool), all on the fake provider. The flooder's groups share one owner; each
    has a coordinator and a member of its own on an account of its own (its own tag, so the
    fake provider knows whom the coordinator asks)."""
    from django.contrib.auth import get_user_model

    from bench.fake_provider import FakeProviderClient
    from garden.models import Agent, ModelAccount
    from groups.models import Group, Membership

    client = FakeProviderClient(provider_url)
    client.configure(default={"latency": args.latency})
    stamp = time.time_ns()
    quiet = build_group(username=f"quiet-{stamp}", base_url=client.base_url("quiet"))
    owner = get_user_model().objects.create(username=f"flood-{stamp}")
    flood, tags = [], {}
    for i in range(args.flood_groups):
        kind = "slow" if i % 2 else "huge"
        tag = f"{kind}{i}"
        tags[tag] = (
            {"member": f"m{i}", "member_tool": "http__fetch", "member_tool_args": {"url": slow_url}}
            if kind == "slow"
            else {"member": f"m{i}", "reply_chars": args.reply_chars}
        )
        account = ModelAccount.objects.create(
            owner=owner, name=tag, provider="openai", model="fake", base_url=client.base_url(tag)
        )
        coordinator = Agent.objects.create(
            owner=owner, handle=f"c{i}", name=f"Coordinator {i}", model_account=account
        )
        member = Agent.objects.create(
            owner=owner,
            handle=f"m{i}",
            name=f"Member {i}",
            model_account=account,
            enabled_tools=["http.fetch"] if kind == "slow" else [],
        )
        group = Group.objects.create(owner=owner, name=f"flood {i}", coordinator=coordinator)
        Membership.objects.create(group=group, agent=coordinator, position=0)
        Membership.objects.create(group=group, agent=member, position=1)
        flood.append(group)
    client.configure(tags=tags)
    return quiet, flood, client


def quiet_requests(group, count: int) -> list[float]:
    """``count`` requests of the quiet owner, one after another; each one's seconds from post
    to finish (read from the request row: the database's clock)."""
    from groups.models import GroupRequest
    from groups.services.requests import request_create

    durations = []
    for i in range(count):
        request = request_create(group=group, text=f"Ordinary request {i}.")
        deadline = time.monotonic() + 300
        while True:
            row = GroupRequest.objects.filter(pk=request.pk).values("state", "finished_at").get()
            if row["state"] in FINISHED:
                break
            if time.monotonic() > deadline:
                raise SystemExit("a quiet request did not finish in 300 s")
            time.sleep(0.02)
        request.refresh_from_db()
        assert request.state == "completed", (request.state, request.outcome_code)
        durations.append((request.finished_at - request.created_at).total_seconds())
    return durations


class Flood(threading.Thread):
    """Keeps every flooding group busy: whenever a group has nothing queued, it is sent more."""

    def __init__(self, groups) -> None:
        super().__init__(daemon=True)
        self.groups, self.sent, self.refused = groups, 0, 0
        self._halt = threading.Event()

    def run(self) -> None:
        from django.db import connection

        from garden.errors import ServiceError
        from groups.models import GroupRequest
        from groups.services.requests import request_create

        try:
            while not self._halt.is_set():
                for group in self.groups:
                    busy = GroupRequest.objects.filter(group=group, state="queued").exists()
                    if busy:
                        continue
                    try:
                        request_create(group=group, text="Flood.")
                        self.sent += 1
                    except ServiceError:
                        self.refused += 1
                self._halt.wait(0.2)
        finally:
            connection.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quiet-requests", type=int, default=8)
    parser.add_argument("--flood-groups", type=int, default=12)
    parser.add_argument("--reply-chars", type=int, default=6_000_000)
    parser.add_argument("--tool-seconds", type=float, default=20.0)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()

    for name, value in FAIR_SHARE_ENV.items():
        os.environ.setdefault(name, value)
    use_services(database=DATABASE, redis_url=REDIS_URL)
    ensure_database(DATABASE, fresh=True)
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    provider, url = start_fake_provider(args.latency)
    slow_url = f"{url}/_fake/slow?seconds={args.tool_seconds:g}"
    # The slow page is on loopback: tools may reach the fake provider's port, as an operator
    # allows an intranet service, and nothing else.
    port = url.rsplit(":", 1)[1]
    env = {
        **DEPLOYED_ENV,
        **FAIR_SHARE_ENV,
        "GARDEN_LOG_LEVEL": "ERROR",
        "GARDEN_EGRESS_ALLOW": f"127.0.0.1:{port}",
    }
    try:
        import django

        django.setup()
        from config.celery import app
        from groups.models import GroupRequest

        print(machine_line())
        quiet, flood, client = seed(args, url, slow_url)
        worker = Worker(
            pool="threads",
            concurrency=args.concurrency,
            env=env,
            name="neighbour-",
            log_path=Path("/tmp") / "bench-neighbour.log",
        )
        try:
            _wait_ready(app, redis_url=REDIS_URL)
            alone = quiet_requests(quiet, args.quiet_requests)
            flooding = Flood(flood)
            flooding.start()
            time.sleep(3.0)  # the flood's calls and tools are under way
            beside = quiet_requests(quiet, args.quiet_requests)
            flooding.stop()
            stats = client.stats()
        finally:
            worker.stop()
        outcomes: dict[str, int] = {}
        for state, code in GroupRequest.objects.filter(group__in=flood).values_list(
            "state", "outcome_code"
        ):
            key = f"{state}/{code or '-'}"
            outcomes[key] = outcomes.get(key, 0) + 1
        a, b = statistics.median(alone), statistics.median(beside)
        print(
            f"\nquiet owner: {args.quiet_requests} requests alone, then {args.quiet_requests} "
            f"beside a flood of {args.flood_groups} groups of one owner (huge replies of "
            f"{args.reply_chars:,} characters, tools that take {args.tool_seconds:g} s); one "
            f"worker, {args.concurrency} threads; model latency {args.latency:g} s"
        )
        print("| quiet owner's requests | completion p50 | p95 | max |")
        print("|---|---|---|---|")
        for name, values in (("alone", alone), ("beside the flood", beside)):
            print(
                f"| {name} | {statistics.median(values):.2f} s | {pct(values, 0.95):.2f} s | "
                f"{max(values):.2f} s |"
            )
        print(f"\nbeside the flood / alone (p50): {b / a:.2f}x (target <= 1.2x)")
        print(
            f"flood: {flooding.sent} requests sent ({flooding.refused} refused by name), "
            f"ended as {outcomes}; the provider saw {stats['per_tag']}"
        )
    finally:
        provider.terminate()
        provider.wait(5)


if __name__ == "__main__":
    main()
