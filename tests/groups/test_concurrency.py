"""Concurrency on PostgreSQL and Redis with real worker processes: reservations race, steps
never overlap (checked by the fence), and a worker killed mid-step is recovered by fence."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest
from django.db import connections

from garden.models import Agent, Message
from garden.worker import running_worker
from groups.budget import reserve_call
from groups.models import CallReservation, GroupRequest
from groups.scheduling import enqueue_step
from groups.services.request_sweep import request_sweep
from groups.services.requests import request_create
from tests.conftest import wait_for
from tests.garden.providers.httpserver import Stream
from tests.groups.helpers import on_server, openai_stream
from tests.support.databases import database_url
from tests.support.providers import openai_reply

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

ASK_LEDGER = {"name": "group.ask", "arguments": {"member": "ledger", "request": "One more figure."}}


@pytest.fixture(autouse=True)
def empty_broker():
    """Each test's workers start on an empty queue: the flood test leaves hundreds of duplicate
    deliveries behind (for requests flushed with its database), which the next test's worker
    would otherwise work through before its own tasks."""
    from config.celery import app

    app.control.purge()
    yield
    app.control.purge()


def _reserve_many(request_ids, agent_id, purpose, barrier, results):
    connections.close_all()
    barrier.wait()
    got = 0
    for _ in range(10):
        for request_id in request_ids:
            if reserve_call(request_id=request_id, purpose=purpose, agent_id=agent_id, fence=None):
                got += 1
    results.put(got)
    connections.close_all()


def _race(request_ids, agent_id, purpose):
    connections.close_all()
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(8), ctx.Queue()
    procs = [
        ctx.Process(target=_reserve_many, args=(request_ids, agent_id, purpose, barrier, results))
        for _ in range(8)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return sum(results.get(timeout=5) for _ in procs)


def test_eight_processes_racing_reservations_never_exceed_the_limit(group_factory):
    requests = []
    for state in ("running", "synthesizing", "completed"):
        group = group_factory(concierge_rules=[], members={"ledger": []}, name=state)
        requests.append(
            GroupRequest.objects.create(group=group, conversation=_conversation(group), state=state)
        )
    agent_id = group.coordinator_id
    ids = [r.pk for r in requests]
    assert _race(ids, agent_id, "working") == 11
    assert _race(ids, agent_id, "synthesis") == 1
    for request in requests:
        request.refresh_from_db()
    assert [(r.working_reserved, r.synthesis_reserved) for r in requests] == [
        (11, 0),
        (0, 1),
        (0, 0),
    ]
    assert CallReservation.objects.filter(request=requests[0]).count() == 11
    assert CallReservation.objects.filter(request=requests[1]).count() == 1


def _conversation(group):
    from groups.services.requests import group_conversation_open

    return group_conversation_open(group=group)


def worker_env() -> dict[str, str]:
    return {
        "DATABASE_URL": database_url(),
        "GARDEN_LOCK_TTL_SECONDS": "4",
        "GARDEN_LOG_LEVEL": "ERROR",
    }


def test_two_workers_flooded_with_duplicate_deliveries_never_overlap_steps(group_factory, tmp_path):
    group = group_factory(
        concierge_rules=[
            {"when": "consolidated answer", "reply": "Final."},
            {"reply": {"text": "More.", "tool_calls": [ASK_LEDGER]}},
        ],
        members={"ledger": [{"reply": "A figure."}]},
    )
    connections.close_all()
    with (
        running_worker(
            pool="threads", concurrency=4, env=worker_env(), log_path=tmp_path / "a.log"
        ),
        running_worker(
            pool="threads", concurrency=4, env=worker_env(), log_path=tmp_path / "b.log"
        ),
    ):
        request = request_create(group=group, text="Keep digging.")
        # Every step is delivered again and again, to both workers, stale and current alike.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            request.refresh_from_db()
            if request.is_finished:
                break
            for fence in range(max(0, request.fence - 2), request.fence + 2):
                enqueue_step(request.pk, fence)
            time.sleep(0.05)  # paces the redeliveries while waiting FOR the end, with a deadline
    request.refresh_from_db()
    assert request.state == "completed", (request.outcome_code, request.outcome)
    assert (request.working_reserved, request.synthesis_reserved) == (11, 1)
    # One model call per step: every reservation has its own fence, in order of reservation.
    fences = list(
        CallReservation.objects.filter(request=request)
        .order_by("id")
        .values_list("fence", flat=True)
    )
    assert len(fences) == 12 and fences == sorted(set(fences))
    # Turns were written in fence order and no step wrote twice.
    steps = list(
        Message.objects.filter(request=request)
        .exclude(step=None)
        .order_by("seq")
        .values_list("step", flat=True)
    )
    assert steps == sorted(steps)
    turns = list(
        Message.objects.filter(
            request=request, kind="turn", speaker_agent__handle="ledger"
        ).values_list("step", flat=True)
    )
    assert len(turns) == len(set(turns)) == 5


def test_a_worker_killed_mid_step_is_recovered_by_fence_with_no_lost_or_duplicated_turn(
    group_factory, tmp_path
):
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Done with the figure."},
            {"reply": {"tool_calls": [ASK_LEDGER]}},
        ],
        members={"ledger": [{"reply": "Figure: 42."}]},
    )
    ledger = group.memberships.get(agent__handle="ledger").agent
    ledger.model_account.options = {**ledger.model_account.options, "delay": 2.0}
    ledger.model_account.save(update_fields=["options"])
    connections.close_all()
    env = worker_env()
    with running_worker(env=env, log_path=tmp_path / "killed.log") as doomed:
        request = request_create(group=group, text="One figure.")
        wait_for(
            lambda: CallReservation.objects.filter(
                request=request, agent=ledger, status="reserved"
            ).exists(),
            timeout=30,
        )
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(10)
    lost = CallReservation.objects.get(request=request, agent=ledger)
    with running_worker(env=env, log_path=tmp_path / "rescuer.log"):
        request_sweep(older_than_seconds=0)
        wait_for(lambda: GroupRequest.objects.get(pk=request.pk).is_finished, timeout=60)
    request.refresh_from_db()
    assert request.state == "completed", (request.outcome_code, request.outcome)
    lost.refresh_from_db()
    assert (lost.status, lost.reason) == ("consumed", "ambiguous: step lost")
    # The killed call stays counted: concierge 2 + ledger twice (lost + redone).
    assert request.working_reserved == 4
    ledger_turns = Message.objects.filter(request=request, speaker_agent=ledger, kind="turn")
    assert [m.text for m in ledger_turns] == ["Figure: 42."]
    assert Message.objects.filter(request=request, speaker_kind="owner").count() == 1


def _post_for(url: str, token: str, seconds: float, results: list, errors: list) -> None:
    """One client: post messages back to back to ``url`` for ``seconds``; record each answer."""
    import httpx

    deadline = time.monotonic() + seconds
    n = 0
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        while time.monotonic() < deadline:
            n += 1
            text = f"message {token[-6:]} {n}"
            try:
                answer = client.post(url, json={"text": text})
            except httpx.HTTPError as exc:  # a dropped connection is a server failure too
                errors.append(repr(exc))
                continue
            try:
                body = answer.json()
            except ValueError:  # an error page, not the API's JSON
                body = answer.text[:2000]
            results.append((text, answer.status_code, body))


@pytest.mark.parametrize("adapter", ["scripted", "openai"])
def test_eight_clients_posting_to_one_group_while_its_requests_step_get_no_server_error(
    adapter, group_factory, owner, live_server, settings, tmp_path, provider_server
):
    """The seed: new owner messages queue behind the running request. Posted back to back by
    eight clients while a real worker steps the group's requests, every post is answered
    (accepted, or refused by name when the queue is full) and every accepted one is stored
    with its request: the post and the step take the rows in one order, so neither deadlocks."""
    import threading

    from garden.services.tokens import token_create

    settings.GARDEN_THROTTLE_RATES = {**settings.GARDEN_THROTTLE_RATES, "messages": ""}
    settings.GARDEN_MAX_QUEUED_PER_GROUP = settings.GARDEN_MAX_QUEUED_PER_OWNER = 100_000
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Done with the figure."},
            {"reply": {"text": "Asking.", "tool_calls": [ASK_LEDGER]}},
        ],
        members={"ledger": [{"reply": "A figure."}]},
    )
    env = worker_env()
    if adapter == "openai":
        # Every call streams a short answer with token counts, as a real server does.
        provider_server.default = Stream(
            tuple(openai_stream(openai_reply("A figure.", usage=(40, 6)))), interval=0.01
        )
        for agent in Agent.objects.filter(owner=owner):
            on_server(owner, agent, provider_server)
        env["GARDEN_EGRESS_ALLOW_PROVIDERS"] = "127.0.0.1"
    url = f"{live_server.url}/api/groups/{group.pk}/messages"
    tokens = [token_create(owner=owner, name=f"client {i}").secret for i in range(8)]
    results: list = []
    errors: list = []
    connections.close_all()
    with running_worker(pool="threads", concurrency=4, env=env, log_path=tmp_path / "worker.log"):
        clients = [
            threading.Thread(target=_post_for, args=(url, t, 20.0, results, errors)) for t in tokens
        ]
        for client in clients:
            client.start()
        for client in clients:
            client.join(90)
    assert errors == []
    server_errors = [(text, code, body) for text, code, body in results if code >= 500]
    assert server_errors == []
    accepted = [(text, body) for text, code, body in results if code == 202]
    refused = {body["code"] for _, code, body in results if code != 202}
    assert refused <= {"QUEUE_FULL"}
    assert len(accepted) >= 8
    for text, body in accepted:
        request = GroupRequest.objects.select_related("message").get(pk=body["request"]["id"])
        assert request.message.content == [{"type": "text", "text": text}]
        assert request.message.request_id == request.pk
