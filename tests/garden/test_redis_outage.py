"""Redis restarting under a live site, as a managed Redis does on every maintenance: a real
redis-server of this test's own (plain, TLS with a private CA, or behind a real Sentinel)
killed mid-request and started again empty, under daphne serving the site, two Celery worker
processes and a websocket open on the room.

While it is down the API answers 503 in garden's error shape, never Django's HTML page; after
it, both workers are alive, the request that was running completes within a minute (no
sweeper's seven), and the next websocket handshake and push succeed."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import httpx
import pytest
from django.test import Client

from bench.fake_provider import FakeProvider, FakeProviderClient
from bench.seeding import build_group
from garden.services.tokens import token_create
from groups.models import GroupRequest
from tests.garden import test_web_connections as served
from tests.support.redis_servers import redis_stack
from tests.support.served_site import served_site
from tests.support.websocket import WebSocket
from tests.support.workers import wait_for

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]

web_env = served.web_env

# Redis comes back this long after it went away; the request must be done a minute after.
DOWN_FOR = 3.0
RECOVERY_BOUND = 60.0


@pytest.fixture(params=["plain", "tls", "sentinel"])
def site(request, tmp_path, web_env) -> Iterator[dict]:
    """daphne and two workers on this test's own Redis (``request.param``)."""
    with redis_stack(tmp_path / "redis", request.param) as (server, redis_env):
        env = {
            k: v
            for k, v in web_env.items()
            if not k.startswith("GARDEN_REDIS_") and k != "GARDEN_CACHE_PREFIX"
        }
        env.update(
            redis_env,
            GARDEN_CACHE_PREFIX=f"outage-{request.param}-{os.getpid()}",
            GARDEN_VAR_DIR=str(tmp_path / "var"),
            GARDEN_EGRESS_ALLOW_PROVIDERS="127.0.0.1",
            GARDEN_WORKER_BEAT_SECONDS="2",
            GARDEN_LOG_LEVEL="WARNING",
        )
        with served_site(tmp_path / "site", env) as served:
            yield {"base": served.base, "port": served.port, "redis": server, "procs": served.procs}


@pytest.fixture
def provider() -> Iterator[FakeProviderClient]:
    fake = FakeProvider(seed=7).start()
    client = FakeProviderClient(fake.url)
    try:
        yield client
    finally:
        client.close()
        fake.stop()


def test_a_redis_restart_mid_request_answers_json_then_the_request_completes(
    site, provider, settings
):
    settings.GARDEN_EGRESS_ALLOW_PROVIDERS = ["127.0.0.1"]
    tag = f"outage-{os.getpid()}-{time.monotonic_ns()}"
    # Each call takes a second: the request is mid-call when Redis goes.
    provider.configure(tags={tag: {"latency": 1.0}})
    group = build_group(username=tag, base_url=provider.base_url(tag), timeout=20)
    token = token_create(owner=group.owner, name="outage").secret
    api = httpx.Client(
        base_url=site["base"], headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    browser = Client()
    browser.force_login(group.owner)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    path = f"/ws/groups/{group.pk}/"

    sent = api.post(f"/api/groups/{group.pk}/messages", json={"text": "Plan the launch."})
    assert sent.status_code in (200, 201, 202), sent.text
    first = GroupRequest.objects.filter(group=group).get()
    wait_for(lambda: provider.stats()["in_flight_by_tag"].get(tag), timeout=30)

    redis = site["redis"]
    redis.stop()
    try:
        # Down: every answer is garden's JSON error, a 503 saying to come back.
        for answer in (
            api.get("/api/groups"),
            api.post(f"/api/groups/{group.pk}/messages", json={"text": "Still there?"}),
        ):
            assert answer.status_code == 503, answer.text
            assert answer.headers["content-type"].startswith("application/json")
            assert answer.json()["code"] == "unavailable"
            assert answer.headers["Retry-After"]
        assert GroupRequest.objects.filter(group=group).count() == 1  # the refused wrote nothing
        time.sleep(DOWN_FOR)  # the outage lasts a while, as a restart does
    finally:
        redis.start()
    back = time.monotonic()

    def finished() -> bool:
        first.refresh_from_db()
        return first.state in GroupRequest.FINISHED_STATES

    wait_for(finished, timeout=RECOVERY_BOUND, interval=0.2)
    assert first.state == GroupRequest.State.COMPLETED, first.outcome_code
    assert time.monotonic() - back < RECOVERY_BOUND
    for name in ("web", "w1", "w2"):
        assert site["procs"][name].poll() is None, f"{name} exited"

    # The next handshake and the next push work on the restarted Redis.
    socket = WebSocket(site["port"], path, cookie=cookie)
    try:
        again = api.post(f"/api/groups/{group.pk}/messages", json={"text": "And the budget?"})
        assert again.status_code in (200, 201, 202), again.text
        # The web's own push of the owner's turn, on the layer's first connection since.
        while True:
            event = socket.receive()
            events = event["events"] if event.get("type") == "batch" else [event]
            said = [e for e in events if e["type"] == "message.created" and "budget" in str(e)]
            if said:
                break
    finally:
        socket.close()
