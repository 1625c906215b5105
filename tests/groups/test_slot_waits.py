"""A step whose owner has no free model-call slot waits without writing: it claims no fence,
projects no room and reads no turn, says once on the request what it waits for, and comes
back later at the same fence, each pause longer than the last (jittered)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from garden.models import Agent, Message
from garden.slots import TOOLS, slot_acquire, slot_backoff, slot_release
from groups.loop.step import advance_request
from groups.models import GroupRequest
from groups.services.requests import request_create, request_start_next


@pytest.fixture
def all_call_slots_taken(owner, settings):
    settings.GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER = 2
    held = [slot_acquire(owner_id=owner.pk) for _ in range(2)]
    assert all(held) and slot_acquire(owner_id=owner.pk) is None
    yield held
    for token in held:
        slot_release(owner_id=owner.pk, token=token)


def test_a_step_waiting_for_a_call_slot_writes_and_projects_nothing(
    group_factory, owner, all_call_slots_taken
):
    group = group_factory(concierge_rules=[], concierge_default="Answered.", members={})
    request = request_create(group=group, text="Hello.")
    request_start_next(group_id=group.pk)
    request.refresh_from_db()
    fence = request.fence

    assert advance_request(request_id=request.pk, fence=fence, group_id=group.pk) == "waiting"
    request.refresh_from_db()
    # Said once, on the request (the room and the API show it); nothing claimed.
    assert request.waiting_for == GroupRequest.WAITING_FOR_CALL_SLOT
    assert request.fence == fence and request.working_reserved == 0
    seen = (request.fence, request.updated_at, request.completed_fence)

    for _ in range(5):
        with CaptureQueriesContext(connection) as queries:
            outcome = advance_request(request_id=request.pk, fence=fence, group_id=group.pk)
        assert outcome == "waiting"
        statements = [q["sql"] for q in queries.captured_queries]
        assert not [s for s in statements if not s.lstrip().upper().startswith("SELECT")]
        assert not [s for s in statements if Message._meta.db_table in s], statements
        assert len(statements) == 1, statements
        request.refresh_from_db()
        assert (request.fence, request.updated_at, request.completed_fence) == seen

    # A slot frees: the same delivery claims, projects, calls and completes.
    slot_release(owner_id=owner.pk, token=all_call_slots_taken.pop())
    assert advance_request(request_id=request.pk, fence=fence, group_id=group.pk) == "completed"
    request.refresh_from_db()
    assert request.state == "completed" and request.waiting_for == ""
    assert request.working_reserved == 1


def test_a_stale_delivery_that_finds_no_slot_ends_quietly(
    group_factory, owner, all_call_slots_taken
):
    group = group_factory(concierge_rules=[], members={})
    request = request_create(group=group, text="Hello.")
    request_start_next(group_id=group.pk)
    request.refresh_from_db()
    outcome = advance_request(request_id=request.pk, fence=request.fence - 1, group_id=group.pk)
    assert outcome == "stale"
    request.refresh_from_db()
    assert request.waiting_for == ""


def test_the_pause_grows_with_each_wait_up_to_the_ceiling_jittered(settings):
    settings.GARDEN_CALL_SLOT_RETRY_SECONDS = 1.0
    settings.GARDEN_SLOT_RETRY_MAX_SECONDS = 8.0
    for waits, ceiling in ((0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (10, 8.0)):
        pauses = {slot_backoff(waits) for _ in range(50)}
        assert all(ceiling / 2 <= p <= ceiling for p in pauses), (waits, pauses)
        assert len(pauses) > 1


def test_tool_slots_are_counted_apart_from_call_slots(owner, settings):
    settings.GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER = 1
    settings.GARDEN_MAX_TOOLS_IN_FLIGHT_PER_OWNER = 1
    call = slot_acquire(owner_id=owner.pk)
    tool = slot_acquire(owner_id=owner.pk, kind=TOOLS)
    assert call and tool
    assert slot_acquire(owner_id=owner.pk) is None
    assert slot_acquire(owner_id=owner.pk, kind=TOOLS) is None
    slot_release(owner_id=owner.pk, token=call)
    slot_release(owner_id=owner.pk, token=tool, kind=TOOLS)


def test_requests_being_answered_count_against_the_owners_queue_cap(owner, settings):
    from garden.errors import QuotaExceeded
    from tests.groups.conftest import make_group

    settings.GARDEN_MAX_QUEUED_PER_OWNER = 2
    settings.GARDEN_MAX_QUEUED_PER_GROUP = 5
    groups = [make_group(owner, name=f"G{n}", concierge_rules=[], members={}) for n in range(3)]
    for group in groups[:2]:
        request_create(group=group, text="Work on this.")
        assert request_start_next(group_id=group.pk).state == "running"
    assert not GroupRequest.objects.filter(state="queued").exists()
    with pytest.raises(QuotaExceeded) as refused:
        request_create(group=groups[2], text="And this.")
    assert refused.value.code == "QUEUE_FULL" and "2 messages waiting" in refused.value.message
    assert not GroupRequest.objects.filter(group=groups[2]).exists()


def test_a_step_waiting_for_a_tool_slot_is_not_taken_for_a_lost_one(group_factory, owner, settings):
    """A step that recorded its reply and waits for a tool slot keeps its fence without the
    group's lock. Another delivery of the step before it (a duplicate, a sweep) must not take
    it for a crashed one and call the model again; only once the wait is older than the
    sweeper's delay — its continuation lost — is the fence claimed anew."""
    settings.GARDEN_MAX_TOOLS_IN_FLIGHT_PER_OWNER = 1
    held = slot_acquire(owner_id=owner.pk, kind=TOOLS)
    try:
        group = group_factory(
            concierge_rules=[
                {"after_tool_result": True, "reply": "Listed."},
                {"reply": {"tool_calls": [{"name": "file.list", "arguments": {}}]}},
            ],
            members={},
        )
        request = request_create(group=group, text="What files are there?")
        request_start_next(group_id=group.pk)
        request.refresh_from_db()
        before = request.fence
        assert advance_request(request_id=request.pk, fence=before, group_id=group.pk) == (
            "waiting_for_tools"
        )
        request.refresh_from_db()
        claimed = request.fence
        assert request.waiting_for == GroupRequest.WAITING_FOR_TOOL_SLOT
        assert request.completed_fence < claimed

        # A second delivery of the step that claimed: stale, nothing claimed, no call made.
        assert advance_request(request_id=request.pk, fence=before, group_id=group.pk) == "stale"
        request.refresh_from_db()
        assert (request.fence, request.working_reserved) == (claimed, 1)

        # The wait went quiet for longer than the sweeper's delay: its continuation was lost,
        # and the same delivery now reclaims the fence.
        GroupRequest.objects.filter(pk=request.pk).update(
            updated_at=timezone.now() - timedelta(seconds=settings.GARDEN_SWEEP_AFTER_SECONDS + 5)
        )
        slot_release(owner_id=owner.pk, token=held, kind=TOOLS)
        held = None
        advance_request(request_id=request.pk, fence=before, group_id=group.pk)
        request.refresh_from_db()
        assert request.fence > claimed
    finally:
        if held:
            slot_release(owner_id=owner.pk, token=held, kind=TOOLS)


def test_a_member_who_leaves_while_its_tools_wait_has_its_calls_answered_not_run(
    group_factory, owner, settings
):
    settings.GARDEN_MAX_TOOLS_IN_FLIGHT_PER_OWNER = 1
    held = slot_acquire(owner_id=owner.pk, kind=TOOLS)
    group = group_factory(
        concierge_rules=[{"reply": "Done."}],
        members={
            "ledger": [
                {"after_tool_result": True, "reply": "Listed."},
                {"reply": {"tool_calls": [{"name": "file.list", "arguments": {}}]}},
            ]
        },
    )
    Agent.objects.filter(owner=owner, handle="ledger").update(enabled_tools=["file.list"])
    request = request_create(group=group, text="@ledger list the files")
    request_start_next(group_id=group.pk)
    request.refresh_from_db()
    assert advance_request(request_id=request.pk, fence=request.fence, group_id=group.pk) == (
        "waiting_for_tools"
    )
    request.refresh_from_db()
    fence = request.fence
    group.memberships.filter(agent__handle="ledger").delete()
    slot_release(owner_id=owner.pk, token=held, kind=TOOLS)
    outcome = advance_request(request_id=request.pk, fence=fence, group_id=group.pk, tools=True)
    assert outcome == "tools"
    results = [
        b
        for m in Message.objects.filter(request=request, step=fence)
        for b in m.content
        if b["type"] == "tool_result"
    ]
    assert [r["content"] for r in results] == [
        "NOT_RUN: the agent left the group before its tools ran."
    ]
