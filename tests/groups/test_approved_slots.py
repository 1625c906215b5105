"""Approved actions inside the owner's fair share (issue #43): an approved MCP call takes one
of its owner's tool slots, as a step's tools do, so six approved at once with a cap of two run
at most two at a time — each exactly once, the rest sent again later — on a real worker
(threads pool), PostgreSQL, Redis and a real MCP server on 127.0.0.1 that counts the calls in
progress."""

from __future__ import annotations

import threading

import anyio
import pytest
from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

from garden.models import Agent
from garden.services.mcp import mcp_server_create
from groups.models import Approval, GroupRequest
from groups.services.approvals import approval_decide
from groups.services.requests import request_create
from tests.conftest import threads_worker, wait_for
from tests.groups.conftest import make_group
from tests.mcp_server import serving

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

HOLD = "mcp.counter.hold"


class Counter:
    """A real MCP server whose one tool takes a while, counting the calls in progress."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.calls = 0
        app = FastMCP("garden-counter", stateless_http=True, json_response=False)
        self.app = app

        @app.tool(
            name="hold",
            description="Takes a while.",
            annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True),
        )
        async def hold(n: int) -> str:
            with self.lock:
                self.running += 1
                self.calls += 1
                self.most = max(self.most, self.running)
            try:
                await anyio.sleep(0.8)  # timing is the behaviour: calls that overlap
            finally:
                with self.lock:
                    self.running -= 1
            return f"held {n}"


@pytest.fixture
def counter(settings):
    settings.GARDEN_EGRESS_ALLOW_MCP = ["127.0.0.1"]
    server = Counter()
    with serving(server.app.streamable_http_app()) as url:
        server.url = url
        yield server


@pytest.fixture
def eight_threads(transactional_db):
    with threads_worker(8) as app:
        yield app


def test_approved_actions_hold_the_owners_tool_slots(eight_threads, counter, settings, owner):
    settings.GARDEN_MAX_TOOLS_IN_FLIGHT_PER_OWNER = 2
    settings.GARDEN_MAX_MODEL_ACCOUNTS_PER_OWNER = 50
    settings.GARDEN_CALL_SLOT_RETRY_SECONDS = 0.1
    settings.GARDEN_SLOT_RETRY_MAX_SECONDS = 0.3
    mcp_server_create(owner=owner, name="counter", url=counter.url)
    requests = []
    for n in range(6):
        group = make_group(
            owner,
            name=f"Hold {n}",
            concierge_rules=[
                {"after_tool_result": True, "reply": "Done."},
                {"reply": {"tool_calls": [{"name": HOLD, "arguments": {"n": n}}]}},
            ],
            members={},
        )
        Agent.objects.filter(pk=group.coordinator_id).update(
            enabled_tools=[HOLD], tool_approvals={HOLD: "always"}
        )
        requests.append(request_create(group=group, text="Hold, please."))
    ids = [r.pk for r in requests]
    wait_for(
        lambda: Approval.objects.filter(request_id__in=ids, status="pending").count() == 6,
        timeout=60,
        interval=0.1,
    )
    for approval in Approval.objects.filter(request_id__in=ids):
        approval_decide(user=owner, approval_id=approval.pk, decision="approve")
    wait_for(
        lambda: (
            GroupRequest.objects.filter(pk__in=ids, state=GroupRequest.State.COMPLETED).count() == 6
        ),
        timeout=90,
        interval=0.2,
    )
    # Each ran exactly once, never more than the owner's two tool slots at a time.
    assert counter.calls == 6
    assert counter.most == 2, counter.most
    assert Approval.objects.filter(request_id__in=ids, executed_at__isnull=False).count() == 6
