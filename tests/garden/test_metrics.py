"""Prometheus metrics (garden/metrics.py) as an operator scrapes them: a real web server
(``manage.py rundashboard``) and a real Celery worker process share a metrics directory; the
web's /metrics, asked with the bearer, adds the worker's samples to its own and to the figures
read from the database, and refuses anyone without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.db import connections
from prometheus_client.parser import text_string_to_metric_families

from garden import metrics
from garden.models import Agent, WorkerBeat
from garden.services.tokens import token_create
from garden.worker import running_worker
from groups.models import GroupRequest
from tests.dashboard.test_rundashboard import free_port
from tests.garden.providers.httpserver import ScriptedServer, Stream
from tests.groups.conftest import make_group
from tests.groups.helpers import on_server, openai_stream
from tests.support.databases import database_url
from tests.support.processes import manage
from tests.support.providers import openai_reply

ROOT = Path(__file__).resolve().parents[2]
SECRET = "metrics-secret-for-tests-only"
CALLS = 3
USAGE = (40, 6)  # prompt and completion tokens of every reply


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of a scrape, by name and labels."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def total(found: dict, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in found.items() if n == name and wanted <= ls)


def scrape(base: str, token: str | None = SECRET) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.get(f"{base}/metrics", headers=headers, timeout=10)


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.1)  # polls FOR a positive outcome, with a deadline
    pytest.fail(f"timed out waiting for {what}")


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_a_scrape_counts_what_the_web_and_its_worker_did_and_refuses_anyone_else(
    owner, loopback_providers, settings, tmp_path
):
    provider_server = ScriptedServer()
    provider_server.default = Stream(tuple(openai_stream(openai_reply("Done.", usage=USAGE))))
    group = make_group(owner, concierge_rules=[], members={})
    for agent in Agent.objects.filter(owner=owner):
        on_server(owner, agent, provider_server)
    api_token = token_create(owner=owner, name="metrics test").secret
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "GARDEN_METRICS_TOKEN": SECRET,
        "GARDEN_METRICS_DIR": str(tmp_path / "metrics"),
        "GARDEN_EGRESS_ALLOW_PROVIDERS": "127.0.0.1",
        # The account's model "m" at $1 / $2 per million tokens.
        "GARDEN_MODEL_PRICES": json.dumps({"m": {"input_per_mtok": "1", "output_per_mtok": "2"}}),
        "GARDEN_LOG_LEVEL": "ERROR",
    }
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    connections.close_all()
    web = subprocess.Popen(
        [sys.executable, "manage.py", "rundashboard", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=open(tmp_path / "web.log", "wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        with running_worker(
            pool="threads", concurrency=2, env=env, log_path=tmp_path / "worker.log"
        ) as worker:
            wait_until(lambda: WorkerBeat.objects.filter(pid=worker.pid).exists(), 30, "the worker")

            def answered():
                try:
                    return scrape(base)
                except httpx.TransportError:
                    return None

            before = samples(wait_until(answered, 30, "the web server").text)

            # Refused without the secret, and nothing told.
            bare = scrape(base, token=None)
            assert bare.status_code == 401 and bare.headers["WWW-Authenticate"] == "Bearer"
            wrong = scrape(base, token=SECRET + "x")
            assert wrong.status_code == 403
            assert b"garden_" not in bare.content + wrong.content

            posted = []
            with httpx.Client(
                base_url=base, headers={"Authorization": f"Bearer {api_token}"}, timeout=10
            ) as client:
                for i in range(CALLS):
                    answer = client.post(
                        f"/api/groups/{group.pk}/messages", json={"text": f"Figure {i}?"}
                    )
                    assert answer.status_code == 202, answer.text
                    posted.append(answer.json()["request"]["id"])
            wait_until(
                lambda: (
                    GroupRequest.objects.filter(pk__in=posted, state="completed").count() == CALLS
                ),
                60,
                f"the requests (log: {(tmp_path / 'worker.log').read_text()[-2000:]})",
            )

            def endings_counted():
                # An ending is counted once it commits, a moment after the row reads completed.
                found = samples(scrape(base).text)
                name = "garden_requests_finished_total"
                ended = total(found, name, state="completed") - total(
                    before, name, state="completed"
                )
                return found if ended >= CALLS else None

            after = wait_until(endings_counted, 20, "the endings in the scrape")
            worker_pid = worker.pid
    finally:
        web.terminate()
        web.wait(20)
        provider_server.close()

    def moved(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    # The worker made the calls: its samples are in the web's scrape.
    assert any(p.name.endswith(f"_{worker_pid}.db") for p in (tmp_path / "metrics").iterdir())
    call = {"provider": "openai", "model": "m", "purpose": "working"}
    assert moved("garden_model_call_seconds_count", **call, outcome="ok") == CALLS
    assert moved("garden_model_call_seconds_bucket", **call, outcome="ok", le="+Inf") == CALLS
    assert moved("garden_model_call_seconds_sum", **call) > 0
    assert moved("garden_step_seconds_count", outcome="completed") == CALLS
    assert moved("garden_model_tokens_total", provider="openai", model="m", direction="input") == (
        CALLS * USAGE[0]
    )
    assert moved("garden_model_tokens_total", provider="openai", model="m", direction="output") == (
        CALLS * USAGE[1]
    )
    expected_cost = CALLS * (USAGE[0] * 1 + USAGE[1] * 2) / 1_000_000
    assert moved("garden_model_cost_usd_total", provider="openai", model="m") == pytest.approx(
        expected_cost
    )
    assert moved("garden_requests_finished_total", state="completed", outcome="CONCLUDED") == CALLS
    # Read from the database at the scrape.
    assert total(after, "garden_requests", state="running") == 0
    assert total(after, "garden_queue_depth") == 0
    assert total(after, "garden_workers_alive") >= 1
    assert total(after, "garden_worker_beats_total", outcome="ok") >= 1
    # Every slot taken was given back.
    assert total(after, "garden_in_flight", kind="calls") == 0
    # Low cardinality: no label names an owner, a group or a request.
    names = {k for (_, labels) in after for k, _ in labels}
    assert not names & {"owner", "owner_id", "group", "group_id", "request", "request_id", "user"}


def test_without_a_token_there_is_no_metrics_page(client, settings):
    settings.GARDEN_METRICS_TOKEN = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {SECRET}").status_code == 404
    settings.GARDEN_METRICS_TOKEN = SECRET
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {SECRET}").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {SECRET}").status_code == 405


def test_with_nothing_configured_recording_keeps_nothing():
    assert not metrics.ENABLED  # this test process sets no GARDEN_METRICS_*
    metrics.model_call(
        provider="openai", model="m", purpose="working", outcome="ok", seconds=1.0, input_tokens=5
    )
    metrics.slot_taken("calls")
    with metrics.step_timed() as ended:
        ended("completed")
    kept = [s for family in metrics.REGISTRY.collect() for s in family.samples]
    assert kept == []


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_a_worker_on_a_host_without_web_serves_its_own_samples_on_its_port(settings, tmp_path):
    port = free_port()
    env = {
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "GARDEN_METRICS_TOKEN": SECRET,
        "GARDEN_METRICS_PORT": str(port),
        "GARDEN_LOG_LEVEL": "ERROR",
    }
    connections.close_all()
    with running_worker(pool="threads", concurrency=1, env=env, log_path=tmp_path / "w.log") as w:
        wait_until(lambda: WorkerBeat.objects.filter(pid=w.pid).exists(), 30, "the worker")
        base = f"http://127.0.0.1:{port}"

        def served_there():
            try:
                answer = scrape(base)
            except httpx.TransportError:  # the worker is ready a moment before its port
                return None
            return answer if answer.status_code == 200 else None

        served = wait_until(served_there, 10, "the worker's port")
        refused = scrape(base, token=None)
        assert refused.status_code == 401 and b"garden_" not in refused.content
        assert scrape(base, token="wrong").status_code == 401
    found = samples(served.text)
    assert total(found, "garden_worker_beats_total", outcome="ok") >= 1
    # The site's figures come from the web's /metrics alone, never once per worker.
    assert not any(name == "garden_workers_alive" for name, _ in found)


_JUNK = 300
_RECORD = f"""
from garden import metrics, metrics_exposition
for i in range({_JUNK}):
    metrics.model_call(
        provider="openai", model=f"junk-{{i}}", purpose="working", outcome="ok", seconds=0.1
    )
    metrics.model_cost(provider="openai", model=f"junk-{{i}}", usd=None)
for provider, model in (
    ("openai", "gpt-4o-2024-08-06"),
    ("anthropic", "claude-3-haiku-20240307"),
    ("openai", "House-Model"),
):
    metrics.model_call(provider=provider, model=model, purpose="working", outcome="ok", seconds=0.1)
print(metrics_exposition.exposition(database=False).decode())
"""


def test_model_names_garden_does_not_know_share_one_label_and_never_crowd_out_known_ones(
    tmp_path,
):
    """Owners name models (their accounts), so only the models garden knows — the price table's
    models of the call's provider, the operator's GARDEN_MODEL_PRICES — get a label of their
    own: hundreds of junk names recorded first all count as "other", and the known models
    recorded after them still get theirs."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "GARDEN_METRICS_DIR", "PROMETHEUS_MULTIPROC_DIR"}
    }
    env.update(
        {
            "GARDEN_VAR_DIR": str(tmp_path),
            "GARDEN_METRICS_TOKEN": SECRET,
            "GARDEN_MODEL_PRICES": json.dumps(
                {"house-model": {"input_per_mtok": "0", "output_per_mtok": "0"}}
            ),
            "GARDEN_LOG_LEVEL": "ERROR",
        }
    )
    out = manage(["shell", "--no-imports", "-c", _RECORD], env)
    assert out.returncode == 0, out.stderr
    found = samples(out.stdout)
    calls = "garden_model_call_seconds_count"
    labelled = {dict(labels)["model"] for name, labels in found if name == calls}
    assert labelled == {"other", "gpt-4o", "claude-3-haiku", "house-model"}
    assert total(found, calls, model="other") == _JUNK
    unpriced = "garden_model_calls_unpriced_total"
    assert {dict(labels)["model"] for name, labels in found if name == unpriced} == {"other"}
