"""The step's claim: on PostgreSQL one statement claims the fence and returns the request and
its group; it claims exactly what the two-statement claim of the embedded default claims."""

from __future__ import annotations

import pytest

from groups import row_locks
from groups.models import GroupRequest
from groups.services.requests import request_create
from groups.step import _claim

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

# (state, fence, completed_fence, delivered fence) -> the fence claimed, or None
CASES = [
    ("running", 3, 3, 3, 4),  # the next step
    ("synthesizing", 3, 3, 3, 4),
    ("running", 4, 3, 3, 5),  # step 4 was claimed and never completed: claimed again higher
    ("running", 4, 4, 3, None),  # a duplicate of a completed step
    ("running", 5, 3, 3, None),  # stale
    ("awaiting_approval", 3, 3, 3, None),  # not steppable
    ("completed", 3, 3, 3, None),
]


@pytest.mark.parametrize(("state", "fence", "completed", "delivered", "claimed"), CASES)
def test_the_one_statement_claim_claims_what_the_two_statement_claim_does(
    group_factory, state, fence, completed, delivered, claimed
):
    group = group_factory(concierge_rules=[], members={"ledger": []})
    found = []
    for claim in ("orm", "one statement"):
        request = request_create(group=group, text="hello")
        GroupRequest.objects.filter(pk=request.pk).update(
            state=state, fence=fence, completed_fence=completed
        )
        if claim == "orm":
            found.append(_claim(request.pk, delivered, group.pk))
        else:
            result = row_locks.claim_fence(
                request_id=request.pk, fence=delivered, group_id=group.pk
            )
            found.append(None if result is None else result[0].fence)
            if result is not None:
                row, its_group = result
                assert row.pk == request.pk and row.state == state
                assert its_group.pk == group.pk and its_group.name == group.name
                assert row.queue == [] and row.group_id == group.pk
        GroupRequest.objects.filter(pk=request.pk).update(state="stopped")
    assert found == [claimed, claimed]


def test_a_wrong_group_claims_nothing(group_factory):
    group = group_factory(concierge_rules=[], members={"ledger": []})
    other = group_factory(concierge_rules=[], members={"advisor": []})
    request = request_create(group=group, text="hello")
    GroupRequest.objects.filter(pk=request.pk).update(state="running")
    assert row_locks.claim_fence(request_id=request.pk, fence=0, group_id=other.pk) is None
    assert GroupRequest.objects.get(pk=request.pk).fence == 0
