"""Usage and cost per owner and UTC day: the owner's own page (their days alone) and the staff
admin's page (every owner), each with its CSV export, both adding up what the requests' calls
recorded."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client

from garden.services.accounts import model_account_create
from groups.models import CallReservation, GroupRequest
from groups.services.requests import request_create
from tests.garden.providers.httpserver import ScriptedServer
from tests.groups.conftest import make_group
from tests.support.driving import drive
from tests.support.providers import openai_reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def server(loopback_providers):
    server = ScriptedServer()
    yield server
    server.close()


def run_request(user, server, usage: tuple[int, int]) -> GroupRequest:
    """One request of ``user``'s group, its coordinator on ``server`` as gpt-4o, run to its
    end in this thread."""
    group = make_group(user, concierge_rules=[], members={}, name=f"Team of {user}")
    coordinator = group.coordinator
    if coordinator.model_account.provider != "openai":
        coordinator.model_account = model_account_create(
            owner=user, name="gpt", provider="openai", model="gpt-4o", base_url=f"{server.url}/v1"
        )
        coordinator.save(update_fields=["model_account"])
    server.reply(200, openai_reply("Done.", usage=usage))
    request = request_create(group=group, text="Tally the month.")
    drive(request)
    assert request.state == "completed", request.outcome
    return request


@pytest.fixture
def figures(owner, stranger, server):
    """The owner's calls on two days (today, and three days ago) and the stranger's today."""
    today = run_request(owner, server, (1_000, 100))
    earlier = run_request(owner, server, (2_000, 300))
    theirs = run_request(stranger, server, (5_555, 555))
    moved = CallReservation.objects.filter(request=earlier)
    moved.update(created_at=moved.get().created_at - timedelta(days=3))
    day = CallReservation.objects.get(request=today).created_at.date()
    return {"today": today, "earlier": earlier, "theirs": theirs, "day": day}


def rows_of(response) -> list[list[str]]:
    assert response["Content-Type"] == "text/csv"
    assert response["Content-Disposition"].startswith('attachment; filename="garden-usage')
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_an_owner_sees_their_own_days_and_exports_them(client, owner, figures):
    client.force_login(owner)
    today, earlier, day = figures["today"], figures["earlier"], figures["day"]
    earlier_day = day - timedelta(days=3)

    page = client.get("/dashboard/usage/")
    exported = client.get("/dashboard/usage/", {"format": "csv"})

    assert page.status_code == 200
    days = page.context["days"]
    assert [(d["day"], d["calls"], d["cost"]) for d in days] == [
        (day, 1, today.cost),
        (earlier_day, 1, earlier.cost),
    ]
    assert today.cost > 0 and earlier.cost > 0
    assert page.context["totals"]["cost"] == today.cost + earlier.cost
    # The stranger's figures are nowhere on the page.
    assert "5555" not in page.content.decode() and str(figures["theirs"].cost) not in (
        page.content.decode()
    )
    assert rows_of(exported) == [
        ["day", "calls", "input_tokens", "output_tokens", "cost_usd", "unpriced_calls"],
        [day.isoformat(), "1", "1000", "100", str(today.cost), "0"],
        [earlier_day.isoformat(), "1", "2000", "300", str(earlier.cost), "0"],
    ]


def test_the_days_asked_for_bound_the_page_and_a_bad_date_is_refused(client, owner, figures):
    client.force_login(owner)
    day = figures["day"].isoformat()

    one_day = client.get("/dashboard/usage/", {"since": day, "until": day, "format": "csv"})
    bad = client.get("/dashboard/usage/", {"since": "last week"})
    backwards = client.get("/dashboard/usage/", {"since": day, "until": "2000-01-01"})

    assert [r[0] for r in rows_of(one_day)[1:]] == [day]
    assert bad.status_code == 400 and bad.context["error"] == (
        "since and until must be dates, YYYY-MM-DD."
    )
    assert bad.context["days"] == []
    assert backwards.status_code == 400
    assert backwards.context["error"] == "since must not be after until."


def test_another_owner_sees_only_their_own(client, stranger, figures):
    client.force_login(stranger)

    exported = client.get("/dashboard/usage/", {"format": "csv"})

    theirs = figures["theirs"]
    assert rows_of(exported)[1:] == [
        [figures["day"].isoformat(), "1", "5555", "555", str(theirs.cost), "0"],
    ]


@pytest.fixture
def staff(django_user_model):
    user = django_user_model.objects.create_superuser(username="staffer", password="pw-staff-1")
    client = Client()
    client.force_login(user)
    return client


def test_the_admins_owner_day_total_matches_the_requests_costs(staff, owner, figures):
    today, theirs, day = figures["today"], figures["theirs"], figures["day"]
    earlier_day = day - timedelta(days=3)

    page = staff.get("/admin/groups/callreservation/usage/")
    exported = staff.get("/admin/groups/callreservation/usage/", {"format": "csv"})
    listing = staff.get("/admin/groups/callreservation/")

    assert page.status_code == 200
    by_owner_day = {(r["owner"], r["day"]): r for r in page.context["days"]}
    assert set(by_owner_day) == {("owner", day), ("owner", earlier_day), ("stranger", day)}
    # Each owner's day is the sum of what that day's requests recorded.
    assert by_owner_day["owner", day]["cost"] == sum(
        (r.cost for r in GroupRequest.objects.filter(group__owner=owner, pk=today.pk)), Decimal(0)
    )
    assert by_owner_day["stranger", day]["cost"] == theirs.cost
    assert (by_owner_day["stranger", day]["input_tokens"], theirs.input_tokens) == (5555, 5555)
    assert page.context["totals"]["cost"] == sum(
        (r.cost for r in GroupRequest.objects.all()), Decimal(0)
    )
    rows = rows_of(exported)
    assert rows[0] == [
        "owner",
        "day",
        "calls",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "unpriced_calls",
    ]
    assert ["stranger", day.isoformat(), "1", "5555", "555", str(theirs.cost), "0"] in rows
    assert len(rows) == 4
    assert b"/admin/groups/callreservation/usage/" in listing.content


def test_the_admin_page_filters_by_owner_and_refuses_an_unknown_one(staff, figures):
    only = staff.get("/admin/groups/callreservation/usage/", {"owner": "stranger"})
    unknown = staff.get("/admin/groups/callreservation/usage/", {"owner": "nobody"})

    assert {r["owner"] for r in only.context["days"]} == {"stranger"}
    assert "owner=stranger" in only.context["csv_query"]
    assert unknown.status_code == 400
    assert unknown.context["error"] == "No user is named 'nobody'."


def test_an_owner_cannot_open_the_admins_usage(client, owner, figures):
    client.force_login(owner)

    response = client.get("/admin/groups/callreservation/usage/", {"format": "csv"})

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_a_far_or_too_long_range_is_refused_not_read(client, owner, figures):
    client.force_login(owner)

    far = client.get("/dashboard/usage/", {"until": "9999-12-31"})
    long = client.get("/dashboard/usage/", {"since": "2000-01-01", "until": "2003-01-01"})

    assert far.status_code == 400 and far.context["error"] == "until must not be after tomorrow."
    assert long.status_code == 400
    assert long.context["error"] == "A usage page covers at most 366 days."
    assert far.context["days"] == [] and long.context["days"] == []


def test_what_an_owner_spent_stays_counted_when_the_thread_is_cleared(client, owner, figures):
    from groups.services.groups import group_clear

    client.force_login(owner)
    before = rows_of(client.get("/dashboard/usage/", {"format": "csv"}))
    today = figures["today"]

    group_clear(group=today.group)

    assert not GroupRequest.objects.filter(pk=today.pk).exists()
    kept = CallReservation.objects.get(cost=today.cost, owner=owner, request=None)
    assert kept.input_tokens == 1_000
    assert rows_of(client.get("/dashboard/usage/", {"format": "csv"})) == before
