"""An approved action waiting for one of its owner's tool slots has one loop of looks: the sweep
of stranded approvals leaves it alone while its next look is due, and sends it again only once
that look is long overdue (its message was lost)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from garden.models import Agent, Artifact
from garden.slots import TOOLS, slot_hold
from groups.models import Approval
from groups.services.approvals import approval_execute, approval_sweep
from groups.services.requests import request_create
from tests.support.driving import drive

WRITE = {"name": "file.write", "arguments": {"title": "Plan", "content": "Save."}}


@pytest.mark.django_db(transaction=True)
def test_the_sweep_does_not_start_a_second_loop_for_an_approval_waiting_for_a_slot(
    group_factory, owner, settings
):
    settings.GARDEN_MAX_TOOLS_IN_FLIGHT_PER_OWNER = 1
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Written."},
            {"reply": {"tool_calls": [WRITE]}},
        ],
        members={},
    )
    Agent.objects.filter(owner=owner, pk=group.coordinator_id).update(
        enabled_tools=["file.write"], approval_tools=["file.write"]
    )
    request = request_create(group=group, text="Write the plan.")
    drive(request, "awaiting_approval")
    approval = Approval.objects.get(request=request, status="pending")
    long_ago = timezone.now() - timedelta(minutes=10)
    Approval.objects.filter(pk=approval.pk).update(
        status="approved", decided_by=owner, decided_at=long_ago
    )
    held = slot_hold(owner_id=owner.pk, kind=TOOLS)  # another of this owner's tools runs
    assert held is not None
    try:
        assert approval_execute(approval_id=approval.pk) == "waiting_for_tool_slot"
        # Its next look is sent and due: the sweep sends nothing more.
        assert approval_sweep(older_than_seconds=60)["approvals_resent"] == 0
        # Its look's message was lost: once that look is long overdue, the sweep sends it again.
        Approval.objects.filter(pk=approval.pk).update(next_try_at=long_ago)
        assert approval_sweep(older_than_seconds=60)["approvals_resent"] == 1
    finally:
        held.release()
    assert approval_execute(approval_id=approval.pk) == "executed"
    assert Artifact.objects.filter(title="Plan").count() == 1
    assert approval_sweep(older_than_seconds=0)["approvals_resent"] == 0
