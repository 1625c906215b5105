"""Personal access tokens: made from a session and shown once, kept only as a hash, used by a
script with no CSRF pair, scoped to their owner, and refused by name once revoked or expired."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from garden.models import AccessToken, Agent
from groups.models import GroupRequest
from groups.services.groups import group_create
from tests.dashboard.helpers import teammate

pytestmark = pytest.mark.django_db


def bearer(token: str) -> APIClient:
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def made(api):
    response = api.post("/api/tokens", {"name": "CI", "expires_in_days": 30})
    assert response.status_code == 201, response.content
    return response.json()


@pytest.fixture
def group(owner):
    ledger = teammate(owner, "ledger", "Ledger")
    advisor = teammate(owner, "advisor", "Advisor")
    return group_create(owner=owner, name="Books", members=[ledger.pk, advisor.pk])


def test_a_token_is_shown_once_and_kept_only_as_a_hash(api, owner, made):
    secret = made["token"]
    assert secret.startswith("gdn_") and len(secret) > 40
    assert made["prefix"] == secret[:12]
    row = AccessToken.objects.get(pk=made["id"])
    assert row.owner == owner and secret not in row.token_hash
    assert all(secret not in str(value) for value in row.__dict__.values())
    listed = api.get("/api/tokens")
    assert [t["name"] for t in listed.json()] == ["CI"]
    assert secret not in listed.content.decode()
    assert "token" not in listed.json()[0]


def test_a_script_posts_to_a_group_with_the_token_and_no_csrf(made, owner, group):
    script = bearer(made["token"])
    response = script.post(
        f"/api/groups/{group.pk}/messages", {"text": "Plan the month."}, format="json"
    )
    assert response.status_code == 202, response.content
    assert GroupRequest.objects.filter(group=group).count() == 1
    assert script.get("/api/groups").json()[0]["name"] == "Books"
    assert AccessToken.objects.get(pk=made["id"]).last_used_at is not None


def test_a_token_reaches_only_its_owners_rows(made, stranger):
    theirs = Agent.objects.get(owner=stranger, handle="concierge")
    script = bearer(made["token"])
    assert script.get(f"/api/agents/{theirs.pk}").status_code == 404
    assert {a["handle"] for a in script.get("/api/agents").json()} == {"father", "concierge"}


@pytest.mark.parametrize(
    ("header", "code"),
    [
        ("Bearer gdn_not-a-real-token", "TOKEN_INVALID"),
        ("Bearer nonsense", "TOKEN_INVALID"),
        ("Bearer two words", "TOKEN_INVALID"),
    ],
)
def test_a_wrong_token_is_a_named_401(header, code):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/groups")
    assert response.status_code == 401
    assert response.json()["code"] == code


def test_revoked_and_expired_tokens_are_refused_by_name(api, made):
    script = bearer(made["token"])
    assert api.delete(f"/api/tokens/{made['id']}").status_code == 204
    response = script.get("/api/groups")
    assert (response.status_code, response.json()["code"]) == (401, "TOKEN_REVOKED")
    assert api.delete(f"/api/tokens/{made['id']}").status_code == 404
    assert api.get("/api/tokens").json() == []

    other = api.post("/api/tokens", {"name": "Old"}).json()
    AccessToken.objects.filter(pk=other["id"]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    response = bearer(other["token"]).get("/api/groups")
    assert (response.status_code, response.json()["code"]) == (401, "TOKEN_EXPIRED")


def test_a_token_cannot_make_or_revoke_tokens(made):
    script = bearer(made["token"])
    for response in (
        script.get("/api/tokens"),
        script.post("/api/tokens", {"name": "more"}, format="json"),
        script.delete(f"/api/tokens/{made['id']}"),
    ):
        assert response.status_code == 403
        assert response.json()["code"] == "TOKEN_CANNOT_MANAGE_TOKENS"
    assert AccessToken.objects.filter(revoked_at__isnull=True).count() == 1


def test_another_owners_token_is_not_revoked(api, stranger):
    from garden.services.tokens import token_create

    theirs = token_create(owner=stranger, name="theirs").token
    assert api.delete(f"/api/tokens/{theirs.pk}").status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


@pytest.mark.parametrize(
    ("payload", "field", "code"),
    [
        ({}, "name", "required"),
        ({"name": "   "}, "name", "blank"),
        ({"name": "x" * 101}, "name", "max_length"),
        ({"name": "CI", "expires_in_days": 0}, "expires_in_days", "INVALID_EXPIRY"),
        ({"name": "CI", "expires_in_days": 367}, "expires_in_days", "INVALID_EXPIRY"),
    ],
)
def test_bad_token_requests_are_named_and_make_nothing(api, payload, field, code):
    response = api.post("/api/tokens", payload)
    assert response.status_code == 400
    assert (field, code) in {(e["field"], e["code"]) for e in response.json()["errors"]}
    assert not AccessToken.objects.exists()


def test_the_token_limit_holds(api, settings):
    settings.GARDEN_MAX_TOKENS_PER_OWNER = 2
    assert api.post("/api/tokens", {"name": "a"}).status_code == 201
    assert api.post("/api/tokens", {"name": "b"}).status_code == 201
    refused = api.post("/api/tokens", {"name": "c"})
    assert (refused.status_code, refused.json()["code"]) == (409, "TOKEN_LIMIT")
    assert AccessToken.objects.count() == 2


def test_staff_revoke_a_leaked_token_in_the_admin(client, django_user_model, owner):
    from garden.services.tokens import token_create

    staff = django_user_model.objects.create_superuser(username="staffer", password="pw-staff-1")
    made = token_create(owner=owner, name="leaked")
    client.force_login(staff)
    page = client.get("/admin/garden/accesstoken/")
    assert page.status_code == 200 and made.secret not in page.content.decode()
    response = client.post(
        "/admin/garden/accesstoken/",
        {"action": "revoke", "_selected_action": [made.token.pk]},
    )
    assert response.status_code == 302
    made.token.refresh_from_db()
    assert made.token.revoked_at is not None
    refused = bearer(made.secret).get("/api/groups")
    assert refused.json()["code"] == "TOKEN_REVOKED"
