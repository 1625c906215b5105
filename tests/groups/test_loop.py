"""The coordinator loop: one request end to end through a real Celery worker, and its routing
driven inline (the worker adds nothing to which speaker comes next)."""

import pytest

from garden.models import Message
from groups.demo import household_finances
from groups.models import CallReservation
from groups.services.requests import request_create
from tests.conftest import wait_for
from tests.support.driving import drive, finished


def turns(request):
    return [
        (m.speaker_agent.handle if m.speaker_agent_id else m.speaker_kind, m.kind, m.text)
        for m in Message.objects.filter(request=request)
        .select_related("speaker_agent")
        .order_by("seq")
    ]


def test_a_full_request_ends_with_one_conclusion(celery_worker_thread, owner):
    group = household_finances(owner)
    request = request_create(
        group=group, text="Review this month's spending and help me decide how much I can save."
    )
    wait_for(finished(request), timeout=30)
    assert request.state == "completed", (request.outcome_code, request.outcome, turns(request))
    speakers = [t[0] for t in turns(request) if t[1] == "turn" and t[2]]
    assert speakers[0] == "owner"
    assert "ledger" in speakers and "advisor" in speakers
    assert speakers.index("ledger") < speakers.index("advisor")
    activity = [t[2] for t in turns(request) if t[1] == "activity"]
    assert activity == [
        "Concierge asked Ledger to analyse this month's transactions.",
        "Concierge asked Finance Advisor to suggest how much can be saved each month.",
    ]
    conclusions = [
        t
        for t in turns(request)
        if t[0] == "concierge" and t[1] == "turn" and "Recommendation" in t[2]
    ]
    assert len(conclusions) == 1
    # Two asks answered together, then the conclusion: 4 working calls, no synthesis call.
    assert (request.working_reserved, request.synthesis_reserved) == (4, 0)
    assert CallReservation.objects.filter(request=request, status="consumed").count() == 4


@pytest.mark.django_db
def test_mentions_route_to_members_in_order_then_the_coordinator(owner):
    group = household_finances(owner)
    request = request_create(group=group, text="@advisor and @ledger, exclude that reimbursement")
    drive(request)
    said = [t[0] for t in turns(request) if t[1] == "turn"]
    assert said == ["owner", "advisor", "ledger", "concierge"], turns(request)
    assert request.state == "completed"
