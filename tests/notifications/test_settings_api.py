"""Settings → Notifications over the API: the owner's channels and per-agent mutes, read and
replaced with PUT /api/notifications. Only the owner's own agents are listed or muted (another
owner's agent is a 404 and nothing is written); a group is never listed; bad input is a named
refusal that writes nothing."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from garden.models import Agent
from garden.services.tokens import token_create
from groups.models import Group
from notifications.models import AgentMute, NotificationSettings
from tests.dashboard.helpers import teammate
from tests.support.api import assert_refused

pytestmark = pytest.mark.django_db

URL = "/api/notifications"


def put(api, **body):
    """PUT the whole preferences (these parts changed), with the session's CSRF pair."""
    return send(api, {"browser": True, "telegram": False, "muted": [], **body})


def send(api, body):
    return api.client.put(URL, body, format="json", HTTP_X_CSRFTOKEN=api.token)


def test_the_defaults_list_every_agent_unmuted_and_no_group(api, owner):
    ledger = teammate(owner, "ledger", "Ledger")
    Group.objects.create(owner=owner, name="Household", coordinator=ledger)
    body = api.get(URL).json()
    assert body["browser"] is True
    assert body["telegram"] is False
    assert body["telegram_linked"] is False
    handles = [a["handle"] for a in body["agents"]]
    assert "ledger" in handles and "concierge" in handles
    assert all(a["muted"] is False for a in body["agents"])
    # A group sends nothing of its own: it is not in the list.
    assert "Household" not in [a["name"] for a in body["agents"]]
    assert NotificationSettings.objects.count() == 0  # a GET writes nothing


def test_a_put_mutes_the_owners_agent_and_reads_back(api, owner):
    ledger = teammate(owner, "ledger", "Ledger")
    answer = put(api, browser=False, muted=[ledger.pk])
    assert answer.status_code == 200, answer.content
    again = api.get(URL).json()
    assert again["browser"] is False
    muted = {a["handle"]: a["muted"] for a in again["agents"]}
    assert muted["ledger"] is True and muted["concierge"] is False
    # Unmuting replaces the list.
    assert put(api, muted=[]).status_code == 200
    assert not AgentMute.objects.filter(owner=owner).exists()


def test_another_owners_agent_is_not_found_and_nothing_is_written(api, owner, stranger):
    theirs = teammate(stranger, "spy", "Spy")
    mine = teammate(owner, "ledger", "Ledger")
    answer = put(api, browser=False, muted=[mine.pk, theirs.pk])
    assert_refused(answer, 404, "NOT_FOUND", field="muted")
    assert not AgentMute.objects.exists()
    assert not NotificationSettings.objects.exists()
    # Nor is it listed.
    assert "spy" not in [a["handle"] for a in api.get(URL).json()["agents"]]


def test_a_removed_agent_cannot_be_muted(api, owner):
    gone = teammate(owner, "gone", "Gone")
    Agent.objects.filter(pk=gone.pk).update(removed_at="2026-01-01T00:00:00Z")
    assert_refused(put(api, muted=[gone.pk]), 404, "NOT_FOUND", field="muted")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"browser": "often"}, "browser"),
        ({"muted": "all"}, "muted"),
        ({"muted": [0]}, "muted.0"),
        ({"muted": [7, "x"]}, "muted.1"),
    ],
)
def test_bad_input_is_refused_by_field_and_writes_nothing(api, owner, body, field):
    assert_refused(put(api, **body), 400, field=field)
    assert not NotificationSettings.objects.exists()
    assert not AgentMute.objects.exists()


def test_a_missing_field_is_named(api, owner):
    answer = send(api, {"browser": True})
    assert_refused(answer, 400, field="telegram")


def test_telegram_cannot_be_turned_on_before_a_chat_is_linked(api, owner):
    answer = put(api, telegram=True)
    assert_refused(answer, 400, "TELEGRAM_NOT_LINKED", field="telegram")
    assert not NotificationSettings.objects.exists()


def test_a_token_reads_with_read_and_writes_only_with_write(owner):
    ledger = teammate(owner, "ledger", "Ledger")
    reader = APIClient()
    reader.credentials(
        HTTP_AUTHORIZATION=f"Bearer {token_create(owner=owner, name='r', scopes=['read']).secret}"
    )
    assert reader.get(URL).status_code == 200
    refused = reader.put(
        URL, {"browser": True, "telegram": False, "muted": [ledger.pk]}, format="json"
    )
    assert refused.status_code == 403
    assert not AgentMute.objects.exists()
    writer = APIClient()
    writer.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(owner=owner, name='w').secret}")
    made = writer.put(
        URL, {"browser": True, "telegram": False, "muted": [ledger.pk]}, format="json"
    )
    assert made.status_code == 200, made.content
    assert list(AgentMute.objects.values_list("agent_id", flat=True)) == [ledger.pk]


def test_a_session_put_without_the_csrf_pair_is_refused(owner):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(owner)
    answer = client.put(URL, {"browser": False, "telegram": False, "muted": []}, format="json")
    assert answer.status_code == 403
    assert not NotificationSettings.objects.exists()
