"""The per-owner rate holds under concurrency: requests arriving at once are counted, not each
read as "under the limit" before any of them was recorded."""

from __future__ import annotations

import threading

import httpx
import pytest

from garden.api.throttles import redis_key
from garden.redis_conn import redis_client
from garden.services.tokens import token_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]


def test_fifty_requests_at_once_against_five_a_minute_let_exactly_five_through(
    live_server, owner, settings
):
    settings.GARDEN_THROTTLE_RATES = {**settings.GARDEN_THROTTLE_RATES, "read": "5/min"}
    redis_client().delete(redis_key(f"throttle_read_{owner.pk}"))
    secret = token_create(owner=owner, name="load").secret
    start = threading.Barrier(50)
    answers: list[httpx.Response] = []
    lock = threading.Lock()

    def one() -> None:
        with httpx.Client(
            base_url=live_server.url, headers={"Authorization": f"Bearer {secret}"}, timeout=60
        ) as client:
            start.wait()
            response = client.get("/api/agents")
        with lock:
            answers.append(response)

    threads = [threading.Thread(target=one) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    statuses = sorted(r.status_code for r in answers)
    assert statuses == [200] * 5 + [429] * 45
    refused = next(r for r in answers if r.status_code == 429)
    assert refused.json()["code"] == "THROTTLED"
    assert "the limit for reading is 5 per minute" in refused.json()["message"]
    assert 0 < int(refused.headers["Retry-After"]) <= 60
