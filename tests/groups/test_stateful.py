"""A stateful property test over post / step / approve / reject / stop / clear / delete /
restore / worker-crash interleavings, with the loop's invariants checked after every move.

Steps are driven in this thread (the same code a worker runs); a "crash" claims a step's fence
(and possibly reserves its call) and then abandons it, as a SIGKILLed worker would.
"""

from __future__ import annotations

import os

import pytest
from django.conf import settings as django_settings
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from garden.errors import QuotaExceeded, ServiceError
from garden.models import Agent
from groups import budget
from groups.loop.claim import claim
from groups.loop.step import advance_request
from groups.models import Approval, CallReservation, GroupRequest
from groups.services.approvals import approval_decide, approval_execute
from groups.services.groups import group_clear, group_delete, group_restore
from groups.services.requests import (
    request_create,
    request_start_next,
    request_stop_active,
)
from tests.groups.conftest import make_group

WRITE = {"name": "file.write", "arguments": {"title": "Plan", "content": "Save."}}
ASK = {"name": "group.ask", "arguments": {"member": "ledger", "request": "Write it."}}


class GroupLoop(RuleBasedStateMachine):
    owner = None

    def __init__(self) -> None:
        super().__init__()
        self.group = make_group(
            self.owner,
            name="Stateful",
            concierge_rules=[
                {"when": "consolidated answer", "reply": "Final."},
                {"after_tool_result": True, "reply": "Done."},
                {"reply": {"tool_calls": [ASK]}},
            ],
            members={
                "ledger": [
                    {"after_tool_result": True, "reply": "Written."},
                    {"reply": {"tool_calls": [WRITE]}},
                ]
            },
        )
        Agent.objects.filter(owner=self.owner, handle="ledger").update(
            enabled_tools=["file.write"], approval_tools=["file.write"]
        )

    def requests(self):
        return GroupRequest.objects.filter(group=self.group)

    def active(self):
        return self.requests().filter(state__in=("running", "synthesizing")).first()

    @initialize(steps=st.integers(min_value=0, max_value=3))
    def start_with_a_request(self, steps):
        self.post("Plan the savings.")
        self.work(steps)

    @rule(text=st.sampled_from(["Plan the savings.", "@ledger write it", "Again."]))
    def post(self, text):
        before = self.requests().count()
        try:
            request_create(group=self.group, text=text)
        except QuotaExceeded as exc:
            # A full queue refuses a message by name, storing nothing ...
            assert exc.code == "QUEUE_FULL"
            queued = self.requests().filter(state="queued").count()
            assert queued == django_settings.GARDEN_MAX_QUEUED_PER_GROUP
            assert self.requests().count() == before
        except ServiceError as exc:
            assert exc.code == "NOT_FOUND"  # ... and so does a deleted group

    @rule(steps=st.integers(min_value=1, max_value=6))
    def work(self, steps):
        """The worker takes up to ``steps`` steps of whatever is active."""
        for _ in range(steps):
            request_start_next(group_id=self.group.pk)
            request = self.active()
            if request is None:
                return
            fence = request.fence if request.completed_fence >= request.fence else request.fence - 1
            advance_request(request_id=request.pk, fence=fence)

    @rule(reserve=st.booleans())
    def crash(self, reserve):
        request = self.active()
        if request is None:
            return
        claimed = claim(
            request.pk,
            request.fence if request.completed_fence >= request.fence else request.fence - 1,
            request.group_id,
        )
        fence = claimed and claimed.request.fence
        if fence and reserve:
            purpose = "synthesis" if request.state == "synthesizing" else "working"
            budget.reserve_call(
                request_id=request.pk,
                purpose=purpose,
                agent_id=self.group.coordinator_id,
                fence=fence,
            )

    @precondition(
        lambda self: Approval.objects.filter(request__group=self.group, status="pending").exists()
    )
    @rule(decision=st.sampled_from(["approve", "reject"]))
    def decide(self, decision):
        approval = Approval.objects.filter(request__group=self.group, status="pending").first()
        try:
            approval_decide(user=self.owner, approval_id=approval.pk, decision=decision)
        except ServiceError:
            return
        if decision == "approve":
            approval_execute(approval_id=approval.pk)

    @rule(decision=st.sampled_from(["approve", "reject"]), pick=st.integers(0, 63))
    def decide_late(self, decision, pick):
        """A decision on any approval, finished or not: must never restart anything. Which one
        is drawn, not left to the database, so a replayed example decides the same one."""
        approvals = list(
            Approval.objects.filter(request__group=self.group)
            .order_by("id")
            .values_list("pk", flat=True)
        )
        if not approvals:
            return
        approval = Approval.objects.get(pk=approvals[pick % len(approvals)])
        try:
            approval_decide(user=self.owner, approval_id=approval.pk, decision=decision)
        except ServiceError:
            return
        if decision == "approve":
            approval_execute(approval_id=approval.pk)

    @rule()
    def stop(self):
        request_stop_active(group=self.group)

    @rule()
    def clear(self):
        try:
            group_clear(group=self.group)
        except ServiceError:  # a deleted group cannot be cleared
            assert self._deleted()

    def _deleted(self) -> bool:
        self.group.refresh_from_db()
        return self.group.deleted_at is not None

    @rule()
    def delete(self):
        self.group.refresh_from_db()
        if self.group.deleted_at is None:
            group_delete(group=self.group)

    @rule()
    def restore(self):
        try:
            self.group = group_restore(owner=self.owner, group_id=self.group.pk)
        except ServiceError:
            pass

    @invariant()
    def at_most_one_active_request(self):
        assert self.requests().filter(state__in=GroupRequest.ACTIVE_STATES).count() <= 1

    @invariant()
    def reservations_within_the_budget(self):
        for r in self.requests():
            assert (
                r.working_reserved <= 11
                and r.synthesis_reserved <= 1
                and r.maintenance_reserved <= 1
            )
            counted = CallReservation.objects.filter(request=r).exclude(status="released")
            assert counted.filter(purpose="working").count() == r.working_reserved
            assert counted.filter(purpose="synthesis").count() == r.synthesis_reserved

    @invariant()
    def no_action_after_its_request_stopped(self):
        for a in Approval.objects.filter(
            request__group=self.group, executed_at__isnull=False
        ).select_related("request"):
            finished = a.request.finished_at
            assert finished is None or a.executed_at <= finished

    @invariant()
    def no_approval_pending_on_a_finished_request(self):
        assert not Approval.objects.filter(
            request__group=self.group,
            status="pending",
            request__state__in=GroupRequest.FINISHED_STATES,
        ).exists()

    @invariant()
    def a_deleted_group_has_no_live_work(self):
        self.group.refresh_from_db()
        if self.group.deleted_at is not None:
            assert (
                not self.requests()
                .filter(state__in=[*GroupRequest.ACTIVE_STATES, "queued"])
                .exists()
            )


@pytest.mark.django_db
def test_the_loop_keeps_its_invariants_under_any_interleaving(owner, settings):
    # Every example adds a group (and its accounts) of the same owner, in one test transaction:
    # the per-group queue cap is the one the machine meets, not the owner's quotas across a
    # hundred examples.
    for name in (
        "QUEUED_PER_OWNER",
        "GROUPS_PER_OWNER",
        "AGENTS_PER_OWNER",
        "MODEL_ACCOUNTS_PER_OWNER",
    ):
        setattr(settings, f"GARDEN_MAX_{name}", 100_000)
    settings.GARDEN_MAX_QUEUED_PER_GROUP = 3
    GroupLoop.owner = owner
    run_state_machine_as_test(
        GroupLoop,
        settings=hypothesis_settings(
            # Twenty-five runs of forty steps keep the suite within CI's time (more with
            # GARDEN_STATEFUL_EXAMPLES); `make faults` drives the same invariants at scale
            # against real workers.
            max_examples=int(os.environ.get("GARDEN_STATEFUL_EXAMPLES", "25")),
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
