"""A worker stopped as an orchestrator stops it (SIGTERM, then a grace period) while it holds a
request's step mid-call: it finishes that step, hands the next one to the broker instead of
running it in place, and exits; the other worker completes the request, all within the grace
that compose and the docs set (stop_grace_period: 150 s, more than a call's timeout plus its
tools)."""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest

from bench.fake_provider import FakeProvider, FakeProviderClient
from bench.seeding import build_group
from bench.workers import socket_owner
from garden.services.tokens import token_create
from groups.models import GroupRequest
from tests.garden import test_web_connections as served
from tests.support.redis_servers import redis_stack
from tests.support.served_site import served_site
from tests.support.workers import wait_for

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]

web_env = served.web_env

# compose's stop_grace_period for the worker (docker-compose.yml).
GRACE = 150


def test_a_worker_stopped_mid_call_hands_the_request_to_the_other_within_the_grace(
    tmp_path, web_env, settings
):
    settings.GARDEN_EGRESS_ALLOW_PROVIDERS = ["127.0.0.1"]
    fake = FakeProvider(seed=3).start()
    provider = FakeProviderClient(fake.url)
    tag = f"stop-{os.getpid()}-{time.monotonic_ns()}"
    provider.configure(tags={tag: {"latency": 2.0}})
    with redis_stack(tmp_path / "redis", "plain") as (_, redis_env):
        env = {**web_env, **redis_env}
        env.update(
            GARDEN_CACHE_PREFIX=f"stop-{os.getpid()}",
            GARDEN_VAR_DIR=str(tmp_path / "var"),
            GARDEN_EGRESS_ALLOW_PROVIDERS="127.0.0.1",
            GARDEN_LOG_LEVEL="WARNING",
        )
        with served_site(tmp_path / "site", env) as site:
            group = build_group(username=tag, base_url=provider.base_url(tag), timeout=20)
            token = token_create(owner=group.owner, name="stop").secret
            answer = httpx.post(
                f"{site.base}/api/groups/{group.pk}/messages",
                json={"text": "Draft the plan."},
                headers={"Authorization": f"Bearer {token}"},
                timeout=30,
            )
            assert answer.status_code == 202, answer.text
            request = GroupRequest.objects.get(group=group)
            workers = {name: site.procs[name] for name in ("w1", "w2")}
            pids = [proc.pid for proc in workers.values()]

            def holder() -> str | None:
                for port in fake.stats()["in_flight_by_tag"].get(tag, []):
                    pid = socket_owner(port, pids)
                    for name, proc in workers.items():
                        if pid == proc.pid:
                            return name
                return None

            stopped = wait_for(holder, timeout=30, interval=0.05)
            other = next(name for name in workers if name != stopped)
            calls_before = fake.stats()["per_tag"][tag]
            workers[stopped].send_signal(signal.SIGTERM)
            sent = time.monotonic()

            # It ends its step and exits long before the request is done: it hands over.
            assert workers[stopped].wait(GRACE) == 0, site.log(stopped)
            request.refresh_from_db()
            assert request.state not in GroupRequest.FINISHED_STATES

            def finished() -> bool:
                request.refresh_from_db()
                return request.state in GroupRequest.FINISHED_STATES

            wait_for(finished, timeout=GRACE, interval=0.2)
            assert request.state == GroupRequest.State.COMPLETED, request.outcome_code
            assert time.monotonic() - sent < GRACE
            assert workers[other].poll() is None, f"{other} exited"
            # The rest of the request's calls came after the stop, from the other worker.
            assert fake.stats()["per_tag"][tag] > calls_before
    provider.close()
    fake.stop()
