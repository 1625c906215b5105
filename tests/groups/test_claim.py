"""The step's claim: on PostgreSQL one statement claims the fence and returns the request, its
group, its roster's stamp and its thread's last seq (its parity with the ORM reference is
tests/groups/test_statements.py's). A kept roster serves only an unchanged roster; a step
costs at most six statements."""

from __future__ import annotations

import statistics

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from garden.models import Agent, ModelAccount
from garden.services.agents import agent_create
from groups import lock_order
from groups.loop.room import load_room
from groups.loop.step import advance_request
from groups.models import GroupRequest, Membership
from groups.services.requests import request_create, request_start_next

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def test_a_wrong_group_claims_nothing(group_factory):
    group = group_factory(concierge_rules=[], members={"ledger": []})
    other = group_factory(concierge_rules=[], members={"advisor": []})
    request = request_create(group=group, text="hello")
    GroupRequest.objects.filter(pk=request.pk).update(state="running")
    assert lock_order.claim_fence(request_id=request.pk, fence=0, group_id=other.pk) is None
    assert GroupRequest.objects.get(pk=request.pk).fence == 0


def test_a_kept_roster_serves_a_step_only_while_no_row_it_was_read_from_changed(group_factory):
    group = group_factory(concierge_rules=[], members={"ledger": []})
    ledger = group.memberships.get(agent__handle="ledger").agent
    request = request_create(group=group, text="hello")
    GroupRequest.objects.filter(pk=request.pk).update(state="running")
    fence = 0

    def step_room():
        nonlocal fence
        claimed = lock_order.claim_fence(request_id=request.pk, fence=fence, group_id=group.pk)
        fence = claimed.request.fence
        room = load_room(
            request.pk,
            fence,
            request=claimed.request,
            group=claimed.group,
            roster_stamp=claimed.roster_stamp,
        )
        return claimed.roster_stamp, room

    stamp, room = step_room()
    again, kept = step_room()
    assert again == stamp and kept.members[ledger.pk] is room.members[ledger.pk], "kept"
    previous = stamp
    changes = [
        lambda: Agent.objects.filter(pk=ledger.pk).update(instructions="Count twice."),
        # Back to the earlier value: still a new version of the row.
        lambda: Agent.objects.filter(pk=ledger.pk).update(instructions=""),
        lambda: ModelAccount.objects.filter(pk=ledger.model_account_id).update(
            options={"rules": [], "default": "changed"}
        ),
        lambda: Membership.objects.filter(group=group, agent=ledger).update(position=9),
        lambda: Membership.objects.create(
            group=group,
            agent=agent_create(
                owner=group.owner,
                handle="advisor",
                name="Advisor",
                model_account=ledger.model_account,
            ),
            position=10,
        ),
        lambda: Membership.objects.filter(group=group, agent__handle="advisor").delete(),
    ]
    for change in changes:
        change()
        stamp, room = step_room()
        # Every change gives a new stamp (a removal gives back the stamp of the roster it
        # restores, whose rows are the very versions it was read from).
        assert stamp != previous
        previous = stamp
        fresh = {a.pk: a for a in Agent.objects.filter(memberships__group=group)}
        assert room.members.keys() == fresh.keys()
        assert room.order == list(
            group.memberships.order_by("position", "id").values_list("agent_id", flat=True)
        )
        for pk, agent in room.members.items():
            assert agent.instructions == fresh[pk].instructions
            assert agent.model_account.options == fresh[pk].model_account.options


def test_a_step_takes_at_most_six_statements(group_factory):
    """The claim (with the roster stamp and the thread's last seq), the reservation, and one
    transaction: the fence check with the reservation consumed, then the turns with the
    request row (BEGIN and COMMIT counted)."""
    ask = {"name": "group.ask", "arguments": {"member": "ledger", "request": "One more."}}
    group = group_factory(
        concierge_rules=[
            {"when": "consolidated answer", "reply": "Final."},
            {"reply": {"text": "More.", "tool_calls": [ask]}},
        ],
        members={"ledger": [{"reply": "A figure."}]},
    )
    request = request_create(group=group, text="Keep digging.")
    request_start_next(group_id=group.pk)
    counts = []
    while True:
        request.refresh_from_db()
        if request.state not in GroupRequest.STEPPABLE_STATES:
            break
        with CaptureQueriesContext(connection) as queries:
            advance_request(request_id=request.pk, fence=request.fence, group_id=group.pk)
        counts.append(len(queries.captured_queries))
    assert request.state == "completed" and len(counts) == 13
    assert statistics.median(counts) <= 6, counts
