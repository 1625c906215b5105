"""Personal access tokens: made from a session and shown once, kept only as a hash, used by a
script with no CSRF pair, scoped to their owner, and refused by name once revoked or expired."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from garden.models import AccessToken, Agent
from groups.models import GroupRequest
from groups.services.groups import group_create
from tests.dashboard.helpers import teammate

pytestmark = pytest.mark.django_db

PW = "pw-owner-123"  # the owner's password (tests/conftest.py)


def bearer(token: str) -> APIClient:
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def made(api):
    response = api.post("/api/tokens", {"name": "CI", "expires_in_days": 30, "password": PW})
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

    other = api.post("/api/tokens", {"name": "Old", "password": PW}).json()
    AccessToken.objects.filter(pk=other["id"]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    response = bearer(other["token"]).get("/api/groups")
    assert (response.status_code, response.json()["code"]) == (401, "TOKEN_EXPIRED")


def test_a_token_cannot_make_or_revoke_tokens(made):
    script = bearer(made["token"])
    for response in (
        script.get("/api/tokens"),
        script.post("/api/tokens", {"name": "more", "password": PW}, format="json"),
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
        ({"name": "CI", "expires_in_days": 0, "password": PW}, "expires_in_days", "INVALID_EXPIRY"),
        (
            {"name": "CI", "expires_in_days": 367, "password": PW},
            "expires_in_days",
            "INVALID_EXPIRY",
        ),
        ({"name": "CI"}, "password", "required"),
    ],
)
def test_bad_token_requests_are_named_and_make_nothing(api, payload, field, code):
    response = api.post("/api/tokens", payload)
    assert response.status_code == 400
    assert (field, code) in {(e["field"], e["code"]) for e in response.json()["errors"]}
    assert not AccessToken.objects.exists()


def test_the_token_limit_holds(api, settings):
    settings.GARDEN_MAX_TOKENS_PER_OWNER = 2
    assert api.post("/api/tokens", {"name": "a", "password": PW}).status_code == 201
    assert api.post("/api/tokens", {"name": "b", "password": PW}).status_code == 201
    refused = api.post("/api/tokens", {"name": "c", "password": PW})
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


def test_making_a_token_needs_the_current_password(api):
    for wrong in ({"name": "CI", "password": "not-it"}, {"name": "CI", "password": ""}):
        refused = api.post("/api/tokens", wrong)
        assert refused.status_code in (400, 403)
        assert refused.json()["errors"][0]["field"] == "password"
    refused = api.post("/api/tokens", {"name": "CI", "password": "not-it"})
    assert (refused.status_code, refused.json()["code"]) == (403, "PASSWORD_INCORRECT")
    assert not AccessToken.objects.exists()
    assert api.post("/api/tokens", {"name": "CI", "password": PW}).status_code == 201


def test_guessing_the_password_for_a_token_is_locked_out(api, settings):
    settings.AXES_FAILURE_LIMIT = 5
    codes = [
        api.post("/api/tokens", {"name": "CI", "password": f"guess-{n}"}).json()["code"]
        for n in range(8)
    ]
    assert codes == ["PASSWORD_INCORRECT"] * 4 + ["LOGIN_LOCKED"] * 4
    locked = api.post("/api/tokens", {"name": "CI", "password": PW})
    assert (locked.status_code, locked.json()["code"]) == (429, "LOGIN_LOCKED")
    assert locked.json()["errors"][0]["field"] == "password"
    assert not AccessToken.objects.exists()


def test_a_token_without_a_lifetime_gets_the_default_one(api, settings):
    settings.GARDEN_TOKEN_DEFAULT_DAYS = 90
    made = api.post("/api/tokens", {"name": "CI", "password": PW}).json()
    expires = AccessToken.objects.get(pk=made["id"]).expires_at
    assert made["expires_at"] is not None
    assert timedelta(days=89) < expires - timezone.now() <= timedelta(days=90)
    # A token from before every token had a lifetime lasts the longest one from its making.
    AccessToken.objects.filter(pk=made["id"]).update(
        expires_at=None, created_at=timezone.now() - timedelta(days=settings.GARDEN_TOKEN_MAX_DAYS)
    )
    refused = bearer(made["token"]).get("/api/groups")
    assert (refused.status_code, refused.json()["code"]) == (401, "TOKEN_EXPIRED")


def test_a_password_change_revokes_every_token(api, owner, made, stranger):
    from garden.services.tokens import token_create

    theirs = token_create(owner=stranger, name="theirs").secret
    script = bearer(made["token"])
    assert script.get("/api/groups").status_code == 200
    owner.set_password("a-brand-new-passphrase")
    owner.save()
    refused = script.get("/api/groups")
    assert (refused.status_code, refused.json()["code"]) == (401, "TOKEN_REVOKED")
    assert bearer(theirs).get("/api/groups").status_code == 200  # another owner's stays


def test_a_password_change_in_the_admin_revokes_the_tokens(client, django_user_model, made):
    staff = django_user_model.objects.create_superuser(username="staffer", password="pw-staff-1")
    client.force_login(staff)
    owner = AccessToken.objects.get(pk=made["id"]).owner
    response = client.post(
        f"/admin/auth/user/{owner.pk}/password/",
        {"password1": "another-long-passphrase", "password2": "another-long-passphrase"},
    )
    assert response.status_code == 302, response.content.decode()[:1000]
    assert AccessToken.objects.get(pk=made["id"]).revoked_at is not None


def test_a_sign_in_that_upgrades_the_hash_is_not_a_password_change(made, owner, settings):
    from django.contrib.auth.hashers import make_password

    # Stored with a hasher the site no longer prefers: the next check re-hashes and saves it.
    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.MD5PasswordHasher",
        "django.contrib.auth.hashers.ScryptPasswordHasher",
    ]
    type(owner).objects.filter(pk=owner.pk).update(
        password=make_password("pw-owner-123", hasher="scrypt")
    )
    owner.refresh_from_db()
    assert owner.check_password("pw-owner-123")
    owner.refresh_from_db()
    assert owner.password.startswith("md5$")  # upgraded
    assert bearer(made["token"]).get("/api/groups").status_code == 200


# --- scopes ---------------------------------------------------------------------------------


def test_a_token_does_only_what_its_scopes_allow_and_manage_is_never_a_default(owner):
    from django.test import Client

    from garden.services.tokens import token_create
    from groups.models import Group
    from tests.groups.conftest import make_group

    group = make_group(owner, concierge_rules=[], members={"ledger": [], "advisor": []})
    default = token_create(owner=owner, name="ci").secret
    reader = token_create(owner=owner, name="r", scopes=["read"]).secret
    manager = token_create(owner=owner, name="m", scopes=["read", "write", "manage"]).secret

    def call(secret, method, path, body=None):
        client = Client()
        return getattr(client, method)(
            path, body or {}, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}"
        )

    assert call(reader, "get", f"/api/groups/{group.pk}").status_code == 200
    denied = call(reader, "patch", f"/api/groups/{group.pk}", {"name": "x"})
    assert denied.status_code == 403 and denied.json()["code"] == "TOKEN_SCOPE"
    assert call(default, "patch", f"/api/groups/{group.pk}", {"name": "Renamed"}).status_code == 200
    for method, path in (
        ("post", f"/api/groups/{group.pk}/clear"),
        ("post", f"/api/groups/{group.pk}/archive"),
        ("delete", f"/api/groups/{group.pk}"),
    ):
        refused = call(default, method, path)
        assert refused.status_code == 403 and refused.json()["code"] == "TOKEN_SCOPE", path
        assert "'manage'" in refused.json()["message"]
    group.refresh_from_db()
    assert (group.name, group.archived_at, group.deleted_at) == ("Renamed", None, None)
    assert call(manager, "delete", f"/api/groups/{group.pk}").status_code == 200
    assert Group.objects.get(pk=group.pk).deleted_at is not None
    assert call(manager, "post", f"/api/groups/{group.pk}/restore").status_code == 200


def test_scopes_are_checked_when_the_token_is_made(api, made):
    assert made["scopes"] == ["read", "write"]
    bad = api.post("/api/tokens", {"name": "x", "password": PW, "scopes": ["all"]})
    assert bad.status_code == 400 and bad.json()["code"] == "INVALID_SCOPES"
    empty = api.post("/api/tokens", {"name": "x", "password": PW, "scopes": []})
    assert empty.json()["code"] == "INVALID_SCOPES"
    assert AccessToken.objects.count() == 1


def _delete_routes() -> list[str]:
    """Every API route that answers DELETE, as a path with 1 for each id."""
    from django.urls import URLPattern, URLResolver, get_resolver

    found: list[str] = []

    def walk(patterns, prefix: str) -> None:
        for entry in patterns:
            route = prefix + str(entry.pattern)
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, route)
            elif isinstance(entry, URLPattern):
                view = getattr(entry.callback, "view_class", None)
                if route.startswith("api/") and view is not None and hasattr(view, "delete"):
                    found.append(
                        "/" + re.sub(r"<(?:\w+:)?\w+>", "1", route).lstrip("^").rstrip("$")
                    )

    walk(get_resolver().url_patterns, "")
    return found


# Routes no token reaches at all, and how they say so.
SESSION_ONLY = {"/api/tokens": "TOKEN_CANNOT_MANAGE_TOKENS", "/api/telegram": "not_authenticated"}


def test_every_delete_needs_the_manage_scope(owner):
    """What cannot be taken back needs ``manage``: every DELETE of the API, whatever it
    removes (a group, an agent, an account, a document, a mission, an MCP server, a webhook),
    is refused to a token with the default scopes before anything is looked up; the tokens
    and Telegram link routes take no token at all."""
    from garden.services.tokens import token_create

    routes = _delete_routes()
    assert len(routes) >= 9, routes
    default = token_create(owner=owner, name="ci").secret
    for path in routes:
        refused = bearer(default).delete(path)
        assert refused.status_code == 403, (path, refused.content)
        expected = SESSION_ONLY.get(path.rsplit("/", 1)[0], "TOKEN_SCOPE")
        assert refused.json()["code"] == expected, (path, refused.content)
