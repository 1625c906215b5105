"""A small run of the fault harness (bench/faults.py, ``make faults``) on PostgreSQL, Redis and
real worker processes: SIGKILL at three points of a step, around two approved actions and
around two approved calls of a real MCP server's tool, and one worker SIGSTOPped past its lock
TTL while another takes over. Every invariant the harness checks must hold. It never restarts
Redis (CI shares it)."""

from __future__ import annotations

import random

import pytest
from django.conf import settings
from django.db import connections

from bench.fake_provider import FakeProvider
from bench.fault_harness import Harness
from bench.fault_mcp import AGENT_TOOL, Tracker
from bench.fault_processes import popen_spawner, worker_env
from bench.fault_scenarios import scenario_approvals, scenario_kill, scenario_stop
from tests.support.databases import database_url

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(120),
]


@pytest.fixture
def harness(tmp_path, loopback_providers):
    provider = FakeProvider(seed=11).start()
    h = Harness(
        provider_url=provider.url,
        log=lambda line: None,
        spawn=popen_spawner(tmp_path, worker_env(database_url(), settings.REDIS_URL)),
    )
    connections.close_all()
    h.start_sweeper()
    try:
        yield h
    finally:
        h.stop_sweeper()
        h.stop_workers()
        h.client.close()
        provider.stop()
        connections.close_all()


@pytest.fixture
def tracker():
    server = Tracker().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def mcp_harness(settings, tracker, harness):
    """The harness with its MCP server (started before the harness, stopped after its
    workers), which this process and the workers (by their environment) may reach on
    127.0.0.1, as an operator allows an internal server."""
    settings.GARDEN_EGRESS_ALLOW_MCP = ["127.0.0.1"]
    harness.mcp = tracker
    return harness


@pytest.mark.parametrize("point", ["before_dispatch", "during_call", "after_write"])
def test_a_worker_killed_at_a_point_of_a_step_loses_and_duplicates_nothing(harness, point):
    # Certain at the point's first hit: one trial must see its fault (make faults varies it).
    result = scenario_kill(harness, point, 1, rng=random.Random(3), bound=40, probability=1.0)
    assert result.faults == 1, f"the worker was not killed at {point}"
    assert result.violations == []
    assert len(result.requests) == 1 and sum(result.outcomes.values()) == 1


def test_a_worker_stopped_past_its_lock_ttl_never_writes_after_the_takeover(harness):
    result = scenario_stop(
        harness, 1, rng=random.Random(5), workers=2, active=2, latency=0.6, bound=40
    )
    assert result.faults == 1
    assert result.violations == []
    # The frozen steps woke up, tried to record their reply and were refused by the fence.
    assert result.details["resumed_stale"] >= result.details["frozen_steps"] >= 1


def test_a_worker_killed_around_an_approved_action_runs_it_at_most_once(harness):
    """One trial right after the claim, one after the action ran and before its result was
    recorded: each action at most once, each result once, every request completed."""
    result = scenario_approvals(harness, 2, rng=random.Random(7), bound=40)
    assert result.faults == 2, "a worker was not killed around its approved action"
    assert result.violations == []
    assert result.outcomes == {"completed:SYNTHESIZED": 2}


def test_a_worker_killed_around_an_approved_mcp_call_calls_the_server_at_most_once(mcp_harness):
    """The member's action is a destructive tool of an MCP server (approval by its
    annotations), each call on a record of its own. One worker dies right after the claim,
    one after the call and before its result was recorded: the server received each approved
    call at most once and none that was rejected, and each death left an honest unknown
    outcome."""
    result = scenario_approvals(mcp_harness, 2, rng=random.Random(7), bound=40, action=AGENT_TOOL)
    assert result.faults == 2, "a worker was not killed around its approved MCP call"
    assert result.violations == []
    assert result.outcomes == {"completed:SYNTHESIZED": 2}
    calls = result.details
    # One death before the call, one after it reached the server.
    assert calls["unknown_called"] >= 1 and calls["unknown"] - calls["unknown_called"] >= 1
    assert 1 <= calls["calls"] <= calls["approved"]


def test_messages_to_one_agent_survive_a_kill_mid_step_and_around_an_approved_action(harness):
    """The same harness on 1:1 requests (an agent's tool call, then its answer): a worker
    killed during a step, and around an approved action, loses and duplicates nothing."""
    harness.one_to_one = True
    killed = scenario_kill(
        harness, "after_write", 1, rng=random.Random(3), bound=40, probability=1.0
    )
    assert killed.faults == 1 and killed.violations == []
    assert killed.outcomes == {"completed:CONCLUDED": 1}
    approved = scenario_approvals(harness, 2, rng=random.Random(7), bound=40)
    assert approved.faults == 2 and approved.violations == []
    assert approved.outcomes == {"completed:CONCLUDED": 2}
