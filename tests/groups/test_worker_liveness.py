"""Workers the web side can see: each worker process beats (garden/heartbeat.py); with no
fresh beat, a request that waits for a worker says so in the API, and the admin lists the
workers with their last beat."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from garden import heartbeat
from garden.models import WorkerBeat
from tests.conftest import wait_for
from tests.support.databases import database_url

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def group(group_factory):
    return group_factory(concierge_rules=[], members={"ledger": []})


def test_a_request_waiting_for_a_worker_says_so_while_none_is_alive(api, group):
    posted = api.post(f"/api/groups/{group.pk}/messages", {"text": "Anyone there?"})
    assert posted.status_code == 202
    assert posted.json()["request"]["waiting_for"] == "worker"
    request_id = posted.json()["request"]["id"]

    def waiting_for():
        room = api.get(f"/api/groups/{group.pk}/messages").json()
        detail = api.get(f"/api/groups/{group.pk}/requests/{request_id}").json()
        assert room["active_request"] is None and room["queued_requests"] == 1
        assert room["queued"][0]["id"] == request_id
        assert room["queued"][0]["waiting_for"] == detail["waiting_for"]
        return detail["waiting_for"]

    assert waiting_for() == "worker"
    heartbeat.beat(hostname="worker-1@host", concurrency=8)
    assert waiting_for() is None
    # A beat older than the stale limit is a worker that died.
    WorkerBeat.objects.update(
        beat_at=timezone.now() - timedelta(seconds=settings.GARDEN_WORKER_STALE_SECONDS + 1)
    )
    assert waiting_for() == "worker"


def test_a_queued_request_is_cancelled_before_it_starts_and_then_waits_for_nothing(
    api, group, stranger
):
    posted = api.post(f"/api/groups/{group.pk}/messages", {"text": "Anyone there?"})
    request_id = posted.json()["request"]["id"]
    cancel = f"/api/groups/{group.pk}/requests/{request_id}/cancel"
    other = APIClient()
    other.force_login(stranger)
    assert other.post(cancel, {}).status_code == 404, "another owner's request is not found"
    cancelled = api.post(cancel, {})
    assert cancelled.status_code == 200, cancelled.content
    assert cancelled.json()["state"] == "stopped"
    assert cancelled.json()["outcome_code"] == "CANCELLED"
    detail = api.get(f"/api/groups/{group.pk}/requests/{request_id}").json()
    assert detail["state"] == "stopped" and detail["waiting_for"] is None
    room = api.get(f"/api/groups/{group.pk}/messages").json()
    assert room["queued"] == [] and room["queued_requests"] == 0
    assert "Anyone there?" in [b.get("text") for m in room["messages"] for b in m["content"]]
    again = api.post(cancel, {})
    assert again.status_code == 409 and again.json()["code"] == "NOT_QUEUED"
    assert api.post(f"/api/groups/{group.pk}/requests/999999/cancel", {}).status_code == 404


def test_the_admin_lists_workers_with_their_last_beat(client, django_user_model):
    staff = django_user_model.objects.create_superuser(username="staff", password="pw-staff-1")
    heartbeat.beat(hostname="alive@host", concurrency=8)
    heartbeat.beat(hostname="gone@host", concurrency=4)
    WorkerBeat.objects.filter(hostname="gone@host").update(
        beat_at=timezone.now() - timedelta(hours=1)
    )
    client.force_login(staff)
    page = client.get("/admin/garden/workerbeat/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "alive@host" in html and "gone@host" in html
    assert html.count('alt="True"') == 1 and html.count('alt="False"') >= 1
    assert client.get("/admin/garden/workerbeat/add/").status_code == 403


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(90)
def test_a_celery_worker_process_beats_while_it_runs_and_leaves_when_it_stops():
    database = settings.DATABASES["default"]
    if database["ENGINE"] != "django.db.backends.postgresql":
        pytest.skip("the worker process needs the test database by URL (PostgreSQL)")
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "GARDEN_WORKER_BEAT_SECONDS": "0.5",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=threads",
         "--concurrency=2", "--hostname=beating@%h", "--without-mingle", "--without-gossip",
         "--loglevel=WARNING"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        beat = wait_for(
            lambda: WorkerBeat.objects.filter(hostname__startswith="beating@").first(),
            timeout=60,
        )
        assert beat.pid == proc.pid and beat.concurrency == 2 and not beat.embedded
        first = beat.beat_at
        wait_for(lambda: WorkerBeat.objects.get(pk=beat.pk).beat_at > first, timeout=10)
        assert heartbeat.workers_alive()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, errors = proc.communicate(timeout=30)
    assert not WorkerBeat.objects.filter(hostname__startswith="beating@").exists(), errors
