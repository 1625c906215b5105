"""Invitations into a team workspace: made by its admins with a link shown once; taken up once,
before they expire, by the person they name (an existing account, or a new one made on the
link's page under the site's password rules); used, expired, withdrawn or forged links are
refused by name and change nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from garden.models import WorkspaceInvitation, WorkspaceMember
from garden.services.tokens import token_hash
from garden.services.workspaces import workspace_create, workspace_member_add
from tests.support.api import sign_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user(
        username="bob", password="pw-bob-123", email="Bob@Example.org"
    )


@pytest.fixture
def team(alice):
    return workspace_create(name="Books team", by=alice)


def invite(client, team, **body):
    response = client.post(f"/api/workspaces/{team.pk}/invitations", body)
    assert response.status_code == 201, response.content
    made = response.json()
    return made, made["link"].rstrip("/").rsplit("/", 1)[1]


def test_an_invitation_by_username_is_taken_up_once_by_that_person(alice, bob, team):
    made, secret = invite(sign_in(alice), team, username="bob", role="viewer", approver=True)
    assert made["link"].startswith("http://testserver/dashboard/join/gdi_")
    assert (made["username"], made["role"], made["approver"], made["invited_by"]) == (
        "bob",
        "viewer",
        True,
        "alice",
    )
    stored = WorkspaceInvitation.objects.get(pk=made["id"])
    assert stored.secret_hash == token_hash(secret) and secret not in stored.secret_hash

    carol = get_user_model().objects.create_user(username="carol", password="pw-carol-123")
    refused = sign_in(carol).post("/api/invitations/accept", {"secret": secret})
    assert (refused.status_code, refused.json()["code"]) == (403, "INVITATION_NOT_YOURS")

    joined = sign_in(bob).post("/api/invitations/accept", {"secret": secret})
    assert joined.status_code == 201, joined.content
    member = WorkspaceMember.objects.get(workspace=team, user=bob)
    assert (member.role, member.approver, member.added_by) == ("viewer", True, alice)

    again = sign_in(bob).post("/api/invitations/accept", {"secret": secret})
    assert (again.status_code, again.json()["code"]) == (409, "INVITATION_USED")
    assert WorkspaceMember.objects.filter(workspace=team).count() == 2


def test_expired_withdrawn_and_forged_links_are_refused_by_name(alice, bob, team):
    admin = sign_in(alice)
    made, expired = invite(admin, team, username="bob")
    WorkspaceInvitation.objects.filter(pk=made["id"]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    withdrawn_made, withdrawn = invite(admin, team, username="bob")
    gone = admin.delete(f"/api/workspaces/{team.pk}/invitations/{withdrawn_made['id']}")
    assert gone.status_code == 204
    assert admin.get(f"/api/workspaces/{team.pk}/invitations").json() == []

    as_bob = sign_in(bob)
    for secret, status, code in (
        (expired, 410, "INVITATION_EXPIRED"),
        (withdrawn, 410, "INVITATION_REVOKED"),
        ("gdi_" + "A" * 43, 404, "INVITATION_INVALID"),
        (expired[:-1] + ("A" if expired[-1] != "A" else "B"), 404, "INVITATION_INVALID"),
    ):
        refused = as_bob.post("/api/invitations/accept", {"secret": secret})
        assert (refused.status_code, refused.json()["code"]) == (status, code), secret
        page = as_bob.get(f"/dashboard/join/{secret}/")
        assert page.status_code == status and code.encode() in page.content
    assert not WorkspaceMember.objects.filter(workspace=team, user=bob).exists()


def test_only_admins_invite_and_an_invitation_names_one_person(alice, bob, team, settings):
    workspace_member_add(workspace=team, user=bob, role="member")
    refused = sign_in(bob).post(f"/api/workspaces/{team.pk}/invitations", {"username": "x"})
    assert (refused.status_code, refused.json()["code"]) == (403, "WORKSPACE_ROLE")

    admin = sign_in(alice)
    url = f"/api/workspaces/{team.pk}/invitations"
    for body, code in (
        ({}, "INVITATION_NAMES_ONE"),
        ({"username": "x", "email": "x@example.org"}, "INVITATION_NAMES_ONE"),
        ({"username": "x", "expires_in_days": 31}, "INVITATION_DAYS"),
    ):
        response = admin.post(url, body)
        assert (response.status_code, response.json()["code"]) == (400, code), body
    settings.GARDEN_MAX_OPEN_INVITATIONS_PER_WORKSPACE = 1
    invite(admin, team, username="x")
    full = admin.post(url, {"username": "y"})
    assert (full.status_code, full.json()["code"]) == (409, "INVITATION_LIMIT")
    assert WorkspaceInvitation.objects.count() == 1


def test_a_token_cannot_take_up_an_invitation(alice, bob, team):
    from garden.services.tokens import token_create
    from tests.garden.test_tokens import bearer

    _, secret = invite(sign_in(alice), team, username="bob")
    token = token_create(owner=bob, name="ci", scopes=["read", "write", "manage"]).secret
    refused = bearer(token).post("/api/invitations/accept", {"secret": secret}, format="json")
    assert refused.status_code == 403
    assert not WorkspaceMember.objects.filter(workspace=team, user=bob).exists()


def test_a_new_person_invited_by_email_makes_their_account_on_the_page_and_joins(
    alice, team, client
):
    _, secret = invite(sign_in(alice), team, email="Dana@Example.org", role="member")
    page = client.get(f"/dashboard/join/{secret}/")
    assert page.status_code == 200
    assert b"Books team" in page.content and b"dana@example.org" in page.content

    for form, code in (
        ({"username": "dana", "password": "123456789", "password2": "123456789"}, "PASSWORD_WEAK"),
        (
            {"username": "dana", "password": "a-Long-pass-1", "password2": "other"},
            "PASSWORDS_DIFFER",
        ),
        (
            {"username": "alice", "password": "a-Long-pass-1", "password2": "a-Long-pass-1"},
            "USERNAME_TAKEN",
        ),
        (
            {"username": "da na", "password": "a-Long-pass-1", "password2": "a-Long-pass-1"},
            "USERNAME_INVALID",
        ),
    ):
        refused = client.post(f"/dashboard/join/{secret}/", form)
        assert refused.status_code == 400 and code.encode() in refused.content, code
    assert not get_user_model().objects.filter(username="dana").exists()

    form = {"username": "dana", "password": "a-Long-pass-1", "password2": "a-Long-pass-1"}
    joined = client.post(f"/dashboard/join/{secret}/", form)
    assert joined.status_code == 302 and joined["Location"] == f"/dashboard/?joined={team.pk}"
    dana = get_user_model().objects.get(username="dana")
    assert dana.email == "dana@example.org" and dana.check_password("a-Long-pass-1")
    assert WorkspaceMember.objects.get(workspace=team, user=dana).role == "member"
    assert client.get("/dashboard/").status_code == 200  # signed in

    client.logout()
    again = client.post(f"/dashboard/join/{secret}/", {**form, "username": "dana2"})
    assert again.status_code == 409 and b"INVITATION_USED" in again.content
    assert not get_user_model().objects.filter(username="dana2").exists()


def test_a_signed_in_person_joins_from_the_page_and_a_username_invitation_asks_to_sign_in(
    alice, bob, team, client
):
    _, secret = invite(sign_in(alice), team, username="bob", role="viewer")
    page = client.get(f"/dashboard/join/{secret}/")
    assert page.status_code == 200 and b"Sign in as bob" in page.content
    signed_up = client.post(
        f"/dashboard/join/{secret}/",
        {"username": "mallory", "password": "a-Long-pass-1", "password2": "a-Long-pass-1"},
    )
    assert signed_up.status_code == 403 and b"INVITATION_NEEDS_SIGN_IN" in signed_up.content

    client.force_login(bob)
    assert b"Join as bob" in client.get(f"/dashboard/join/{secret}/").content
    joined = client.post(f"/dashboard/join/{secret}/")
    assert joined.status_code == 302
    assert WorkspaceMember.objects.get(workspace=team, user=bob).role == "viewer"
