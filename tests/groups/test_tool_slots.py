"""Tools inside the owner's fair share: one owner's slow tools run at most
GARDEN_MAX_TOOLS_IN_FLIGHT_PER_OWNER at a time, the rest wait with their replies recorded and
hold no worker thread, and another owner's request is answered meanwhile — on a real worker
(threads pool), PostgreSQL and Redis."""

from __future__ import annotations

import threading

import pytest

from garden.models import Agent, Message
from garden.providers import ToolSpec
from garden.tools import _REGISTRY, Tool, ToolOutcome, register
from groups.models import GroupRequest
from groups.services.requests import request_create
from tests.conftest import threads_worker, wait_for
from tests.groups.conftest import make_group

BLOCK = "test.block"


class SlowTool:
    """A tool whose run blocks until the test releases it, counting the runs in progress."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.runs = 0

    def __call__(self, ctx, arguments) -> ToolOutcome:
        with self.lock:
            self.running += 1
            self.runs += 1
            self.most = max(self.most, self.running)
        try:
            self.release.wait(timeout=90)
            return ToolOutcome("released")
        finally:
            with self.lock:
                self.running -= 1


@pytest.fixture
def slow_tool():
    tool = SlowTool()
    register(
        Tool(
            spec=ToolSpec(name=BLOCK, description="Blocks.", parameters={"type": "object"}),
            handler=tool,
        )
    )
    yield tool
    tool.release.set()
    _REGISTRY.pop(BLOCK, None)


@pytest.fixture
def eight_threads(transactional_db):
    with threads_worker(8) as app:
        yield app


def tool_group(owner, name: str):
    group = make_group(
        owner,
        name=name,
        concierge_rules=[
            {"after_tool_result": True, "reply": "Done."},
            {"reply": {"tool_calls": [{"name": BLOCK, "arguments": {}}]}},
        ],
        members={"ledger": []},
    )
    Agent.objects.filter(pk=group.coordinator_id).update(enabled_tools=[BLOCK])
    return group


@pytest.mark.postgres
@pytest.mark.redis
def test_twenty_slow_tools_of_one_owner_leave_another_owners_request_answered(
    eight_threads, slow_tool, settings, django_user_model
):
    settings.GARDEN_MAX_TOOLS_IN_FLIGHT_PER_OWNER = 2
    settings.GARDEN_MAX_MODEL_ACCOUNTS_PER_OWNER = 50
    settings.GARDEN_CALL_SLOT_RETRY_SECONDS = 0.1
    settings.GARDEN_SLOT_RETRY_MAX_SECONDS = 0.5
    busy = django_user_model.objects.create_user(username="busy", password="pw-busy-123")
    other = django_user_model.objects.create_user(username="other", password="pw-other-123")
    theirs = [
        request_create(group=tool_group(busy, f"Slow {n}"), text="Run the slow tool.")
        for n in range(20)
    ]
    quiet = make_group(
        other, name="Quiet", concierge_rules=[], concierge_default="Answered.", members={}
    )

    def waiting_for_tools():
        return (
            GroupRequest.objects.filter(
                pk__in=[r.pk for r in theirs],
                waiting_for=GroupRequest.WAITING_FOR_TOOL_SLOT,
            ).count()
            == 18
        )

    # Every reply asked for the slow tool: two run, eighteen wait for the owner's tool slot.
    wait_for(waiting_for_tools, timeout=60, interval=0.1)
    assert slow_tool.running == 2
    mine = request_create(group=quiet, text="A quick one, please.")
    wait_for(lambda: GroupRequest.objects.get(pk=mine.pk).is_finished, timeout=30)

    # Answered while the busy owner's tools are still blocked and none of its requests ended.
    assert GroupRequest.objects.get(pk=mine.pk).state == "completed"
    assert slow_tool.running == 2 and not slow_tool.release.is_set()
    assert not GroupRequest.objects.filter(
        pk__in=[r.pk for r in theirs], state__in=GroupRequest.FINISHED_STATES
    ).exists()

    slow_tool.release.set()
    wait_for(
        lambda: (
            GroupRequest.objects.filter(
                pk__in=[r.pk for r in theirs], state=GroupRequest.State.COMPLETED
            ).count()
            == 20
        ),
        timeout=120,
        interval=0.2,
    )
    # Each ran its tool exactly once, never more than two at a time, with one model call
    # before and one after, and nothing waits any more.
    assert slow_tool.runs == 20 and slow_tool.most == 2
    for request in GroupRequest.objects.filter(pk__in=[r.pk for r in theirs]):
        assert request.waiting_for == "" and request.working_reserved == 2
        results = [
            b
            for m in Message.objects.filter(request=request)
            for b in m.content
            if b["type"] == "tool_result"
        ]
        assert [b["content"] for b in results] == ["released"]
