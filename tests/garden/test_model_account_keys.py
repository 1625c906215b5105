"""Model-account keys on a shared site: an owner never names an environment variable; the
operator's credentials go only where the operator bound them and to whom they were granted; a
pasted key is encrypted at rest, write-only, and never in an error.

Every "never reaches" assertion is made on what a real local HTTP server received."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import Group as AuthGroup
from django.core.management import call_command
from django.db import connection

from garden.credentials import api_key_decrypt
from garden.errors import ServiceError
from garden.models import Message, ModelAccount
from garden.providers import ConfirmedRejection, get_provider
from garden.providers.types import ChatMessage, ChatRequest, TextBlock
from garden.selectors import account_config, account_key_status
from garden.services.accounts import model_account_create
from tests.garden.providers.httpserver import Respond, ScriptedServer
from tests.groups.helpers import answered_by
from tests.support.providers import openai_reply

pytestmark = pytest.mark.django_db

OK = openai_reply("fine", usage=None)


@pytest.fixture
def operator_api(settings):
    """The operator's model server (where its credential may go)."""
    settings.GARDEN_EGRESS_ALLOW_PROVIDERS = ["127.0.0.1"]
    server = ScriptedServer()
    server.default = Respond(200, OK)
    yield server
    server.close()


@pytest.fixture
def foreign(settings):
    """A server an owner controls (reachable here only because it runs on loopback)."""
    server = ScriptedServer()
    server.default = Respond(200, OK)
    yield server
    server.close()


@pytest.fixture
def credential(settings, monkeypatch, operator_api):
    monkeypatch.setenv("GARDEN_TEST_OPERATOR_KEY", "sk-operator-secret")
    settings.GARDEN_CREDENTIALS = {
        "shared": {
            "provider": "openai",
            "env": "GARDEN_TEST_OPERATOR_KEY",
            "base_url": f"{operator_api.url}/v1",
            "users": "*",
        }
    }
    return "shared"


def ask(owner, account) -> Message:
    """One 1:1 message answered by ``account``, stepped as the worker steps it."""
    return answered_by(owner, account)


def all_seen(*servers) -> str:
    return repr([(r.headers, r.body) for s in servers for r in s.requests])


def test_no_owner_can_name_an_environment_variable(api, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://secret@db/prod")
    for ref in ("env:DATABASE_URL", "env:DJANGO_SECRET_KEY", "DATABASE_URL"):
        response = api.post(
            "/api/model-accounts",
            {"name": "x", "provider": "openai", "model": "m", "secret_ref": ref},
        )
        assert response.status_code == 400
        assert response.json()["errors"][0]["code"] == "SECRET_REF_NOT_ACCEPTED"
    assert not ModelAccount.objects.filter(provider="openai").exists()


def test_a_legacy_env_reference_never_reaches_a_foreign_base_url(
    owner, foreign, settings, monkeypatch
):
    settings.GARDEN_EGRESS_ALLOW_PROVIDERS = ["127.0.0.1"]
    monkeypatch.setenv("GARDEN_TEST_WORKER_SECRET", "postgres://user:pw@db/prod")
    account = ModelAccount.objects.create(
        owner=owner,
        name="old",
        provider="openai",
        model="m",
        base_url=f"{foreign.url}/v1",
        legacy_secret_ref="env:GARDEN_TEST_WORKER_SECRET",
        timeout_seconds=5,
    )
    reply = ask(owner, account)
    assert reply.kind == "notice" and "CREDENTIAL_NOT_ALLOWED" in reply.text
    assert foreign.requests == []
    status = account_key_status(account)
    assert status["usable"] is False and status["code"] == "CREDENTIAL_NOT_ALLOWED"
    assert "choose a credential or paste a key" in status["problem"]


def test_a_legacy_reference_the_operator_configured_keeps_working_at_its_base_url(
    owner, credential, operator_api
):
    account = ModelAccount.objects.create(
        owner=owner,
        name="old",
        provider="openai",
        model="m",
        legacy_secret_ref="env:GARDEN_TEST_OPERATOR_KEY",
        timeout_seconds=5,
    )
    assert ask(owner, account).text == "fine"
    assert operator_api.last.headers["authorization"] == "Bearer sk-operator-secret"


def test_the_operators_credential_goes_only_to_its_own_base_url(
    owner, credential, operator_api, foreign, api
):
    # Asked for with a foreign base URL: refused, nothing stored.
    response = api.post(
        "/api/model-accounts",
        {
            "name": "steal",
            "provider": "openai",
            "model": "m",
            "credential": credential,
            "base_url": f"{foreign.url}/v1",
        },
    )
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["code"] == "CREDENTIAL_BASE_URL_MISMATCH"
    # A row that points elsewhere anyway (edited in the database) fails without sending.
    forced = ModelAccount.objects.create(
        owner=owner,
        name="forced",
        provider="openai",
        model="m",
        credential=credential,
        base_url=f"{foreign.url}/v1",
        timeout_seconds=5,
    )
    assert "CREDENTIAL_BASE_URL_MISMATCH" in ask(owner, forced).text
    # Used as meant: the key goes to the operator's server, and only there.
    proper = api.post(
        "/api/model-accounts",
        {"name": "shared", "provider": "openai", "model": "m", "credential": credential},
    ).json()
    assert proper["key"] == {
        "source": "operator",
        "credential": "shared",
        "usable": True,
        "code": None,
        "problem": None,
        "label": "operator credential 'shared'",
    }
    assert ask(owner, ModelAccount.objects.get(pk=proper["id"])).text == "fine"
    assert operator_api.last.headers["authorization"] == "Bearer sk-operator-secret"
    assert "sk-operator-secret" not in all_seen(foreign)
    assert foreign.requests == []


def test_credentials_are_granted_to_users_and_groups(settings, django_user_model, api, owner):
    settings.GARDEN_CREDENTIALS = {
        "everyone": {"provider": "openai", "env": "X_KEY", "users": "*"},
        "alice-only": {"provider": "openai", "env": "Y_KEY", "users": ["alice"]},
        "research": {"provider": "anthropic", "file": "/nonexistent", "groups": ["research"]},
    }
    assert [c["name"] for c in api.get("/api/credentials").json()] == ["everyone"]
    refused = api.post(
        "/api/model-accounts",
        {"name": "x", "provider": "openai", "model": "m", "credential": "alice-only"},
    )
    assert refused.json()["errors"][0]["code"] == "CREDENTIAL_NOT_ALLOWED"
    owner.groups.add(AuthGroup.objects.create(name="research"))
    names = [c["name"] for c in api.get("/api/credentials").json()]
    assert names == ["everyone", "research"]
    assert "env" not in repr(api.get("/api/credentials").json())
    wrong = api.post(
        "/api/model-accounts",
        {"name": "x", "provider": "openai", "model": "m", "credential": "research"},
    )
    assert wrong.json()["errors"][0]["code"] == "CREDENTIAL_PROVIDER_MISMATCH"
    # Granted, but the operator's file is missing: the account says so, by name.
    made = api.post(
        "/api/model-accounts",
        {"name": "r", "provider": "anthropic", "model": "claude", "credential": "research"},
    ).json()
    assert made["key"]["usable"] is False and made["key"]["code"] == "CREDENTIAL_UNAVAILABLE"


def test_a_pasted_key_is_encrypted_at_rest_write_only_and_sent_only_to_its_account(
    api, owner, operator_api
):
    created = api.post(
        "/api/model-accounts",
        {
            "name": "mine",
            "provider": "openai",
            "model": "m",
            "api_key": "sk-mine-0123456789",
            "base_url": f"{operator_api.url}/v1",
            "timeout_seconds": 5,
        },
    )
    assert created.status_code == 201, created.content
    assert "sk-mine-0123456789" not in created.content.decode()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT api_key_encrypted FROM garden_modelaccount WHERE id = %s",
            [created.json()["id"]],
        )
        stored = cursor.fetchone()[0]
    assert stored and "sk-mine" not in stored
    assert api_key_decrypt(stored) == "sk-mine-0123456789"
    for path in ("/api/model-accounts", f"/api/model-accounts/{created.json()['id']}"):
        assert "sk-mine" not in api.get(path).content.decode()
    account = ModelAccount.objects.get(pk=created.json()["id"])
    assert ask(owner, account).text == "fine"
    assert operator_api.last.headers["authorization"] == "Bearer sk-mine-0123456789"


def test_a_key_echoed_in_an_error_is_redacted(owner, operator_api):
    operator_api.reply(401, {"error": "bad key sk-echo-987654321"})
    account = model_account_create(
        owner=owner,
        name="e",
        provider="openai",
        model="m",
        api_key="sk-echo-987654321",
        base_url=f"{operator_api.url}/v1",
    )
    provider = get_provider(account_config(account))
    with pytest.raises(ConfirmedRejection) as failed:
        provider.complete(
            ChatRequest(system="", messages=(ChatMessage("user", (TextBlock("hi"),)),))
        )
    assert "sk-echo-987654321" not in str(failed.value) and "[redacted]" in str(failed.value)


def test_replacing_and_clearing_a_key(api, operator_api):
    made = api.post(
        "/api/model-accounts",
        {"name": "m", "provider": "openai", "model": "m", "api_key": "sk-first"},
    ).json()
    path = f"/api/model-accounts/{made['id']}"
    assert api.patch(path, {"name": "renamed"}).json()["has_api_key"] is True
    api.patch(path, {"api_key": "sk-second"})
    assert api_key_decrypt(ModelAccount.objects.get(pk=made["id"]).api_key_encrypted) == "sk-second"
    cleared = api.patch(path, {"clear_api_key": True}).json()
    assert cleared["has_api_key"] is False and cleared["key"]["source"] == "none"


def test_keys_rotate_with_multifernet(owner, settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.GARDEN_FERNET_KEYS = [old]
    account = model_account_create(
        owner=owner, name="r", provider="openai", model="m", api_key="sk-rotate-me"
    )
    settings.GARDEN_FERNET_KEYS = [new, old]
    call_command("rotate_api_keys")
    settings.GARDEN_FERNET_KEYS = [new]
    account.refresh_from_db()
    assert api_key_decrypt(account.api_key_encrypted) == "sk-rotate-me"
    settings.GARDEN_FERNET_KEYS = [old]
    assert account_key_status(account)["code"] == "KEY_UNREADABLE"


def test_rotation_re_encrypts_mcp_server_headers_too(owner, settings):
    from garden.credentials import api_key_encrypt
    from garden.models import McpServer
    from garden.tools.mcp import server_headers

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.GARDEN_FERNET_KEYS = [old]
    server = McpServer.objects.create(
        owner=owner,
        name="wiki",
        url="https://mcp.example.com/mcp",
        headers_encrypted=api_key_encrypt('{"Authorization": "Bearer t0ken"}'),
        header_names=["Authorization"],
    )
    settings.GARDEN_FERNET_KEYS = [new, old]
    call_command("rotate_api_keys")
    settings.GARDEN_FERNET_KEYS = [new]
    server.refresh_from_db()
    assert server_headers(server) == {"Authorization": "Bearer t0ken"}


def test_production_without_fernet_keys_refuses_to_store_a_key(owner, settings):
    settings.PRODUCTION = True
    settings.GARDEN_FERNET_KEYS = []
    with pytest.raises(ServiceError) as refused:
        model_account_create(owner=owner, name="p", provider="openai", model="m", api_key="sk-x")
    assert refused.value.code == "KEY_STORAGE_NOT_CONFIGURED"
    assert not ModelAccount.objects.filter(name="p").exists()


def test_the_admin_key_field_is_write_only(admin_client, owner):
    account = model_account_create(
        owner=owner, name="adm", provider="openai", model="m", api_key="sk-admin-visible?"
    )
    page = admin_client.get(f"/admin/garden/modelaccount/{account.pk}/change/").content.decode()
    assert "sk-admin-visible" not in page and account.api_key_encrypted not in page
    assert 'name="api_key"' in page
    response = admin_client.post(
        f"/admin/garden/modelaccount/{account.pk}/change/",
        {
            "owner": owner.pk,
            "name": "adm",
            "provider": "openai",
            "model": "m",
            "base_url": "",
            "credential": "",
            "timeout_seconds": "60",
            "options": "{}",
            "api_key": "sk-admin-new",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    account.refresh_from_db()
    assert api_key_decrypt(account.api_key_encrypted) == "sk-admin-new"
    listing = admin_client.get("/admin/garden/modelaccount/").content.decode()
    assert "sk-admin-new" not in listing and "your key (stored encrypted)" in listing


def test_the_migration_moves_configured_legacy_references_onto_credentials(owner, settings):
    import importlib

    from django.apps import apps

    settings.GARDEN_CREDENTIALS = {
        "openai": {"provider": "openai", "env": "OPENAI_API_KEY", "users": "*"}
    }
    allowed = ModelAccount.objects.create(
        owner=owner, name="a", provider="openai", model="m", legacy_secret_ref="env:OPENAI_API_KEY"
    )
    foreign = ModelAccount.objects.create(
        owner=owner,
        name="b",
        provider="openai",
        model="m",
        base_url="https://example.net/v1",
        legacy_secret_ref="env:OPENAI_API_KEY",
    )
    other = ModelAccount.objects.create(
        owner=owner, name="c", provider="openai", model="m", legacy_secret_ref="env:DATABASE_URL"
    )
    migration = importlib.import_module("garden.migrations.0004_model_account_keys")
    migration.adopt_operator_credentials(apps, None)
    rows = {
        a.name: (a.credential, a.legacy_secret_ref)
        for a in ModelAccount.objects.filter(pk__in=[allowed.pk, foreign.pk, other.pk])
    }
    assert rows == {
        "a": ("openai", ""),
        "b": ("", "env:OPENAI_API_KEY"),
        "c": ("", "env:DATABASE_URL"),
    }


def test_a_key_that_no_header_can_carry_is_refused_by_name(api):
    for key in ("sk-ключ", "sk key", "sk-\tkey", ""):
        response = api.post(
            "/api/model-accounts", {"name": "k", "provider": "openai", "model": "m", "api_key": key}
        )
        assert response.status_code == 400, (key, response.content)
    assert not ModelAccount.objects.filter(name="k").exists()


def test_the_account_test_never_shows_what_a_server_answered(api, owner, operator_api):
    operator_api.reply(401, {"error": "internal-service-banner v1.2 secret-config"})
    made = api.post(
        "/api/model-accounts",
        {
            "name": "t",
            "provider": "openai",
            "model": "m",
            "api_key": "sk-test",
            "base_url": f"{operator_api.url}/v1",
        },
    )
    result = api.post(f"/api/model-accounts/{made.json()['id']}/test").json()
    assert result["ok"] is False and result["code"] == "PROVIDER_AUTH_FAILED"
    assert "banner" not in result["message"] and "secret-config" not in result["message"]


def _bearer(api, owner):
    """A script's client for ``owner``: an access token, no session (with ``manage``: a change
    that drops the stored key needs it)."""
    from rest_framework.test import APIClient

    scopes = ["read", "write", "manage"]
    made = api.post(
        "/api/tokens", {"name": "script", "password": "pw-owner-123", "scopes": scopes}
    ).json()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {made['token']}")
    client.default_format = "json"
    return client


@pytest.mark.parametrize("by", ["session", "token"])
def test_a_pasted_key_never_follows_a_base_url_change(by, api, owner, operator_api, foreign):
    made = api.post(
        "/api/model-accounts",
        {
            "name": "mine",
            "provider": "openai",
            "model": "m",
            "api_key": "sk-bound-0123456789",
            "base_url": f"{operator_api.url}/v1",
        },
    ).json()
    path = f"/api/model-accounts/{made['id']}"
    client = api if by == "session" else _bearer(api, owner)
    changed = client.patch(path, {"base_url": f"{foreign.url}/v1"})
    assert changed.status_code == 200, changed.content
    assert changed.json()["api_key_cleared"] is True
    assert changed.json()["has_api_key"] is False and changed.json()["key"]["source"] == "none"
    result = client.post(f"{path}/test").json()
    assert result["ok"] is True  # the foreign server answered a call that carried no key
    assert foreign.requests and all("authorization" not in r.headers for r in foreign.requests)
    assert "sk-bound" not in all_seen(foreign)


def test_a_key_given_with_the_new_base_url_is_kept(api, operator_api, foreign):
    made = api.post(
        "/api/model-accounts",
        {
            "name": "m",
            "provider": "openai",
            "model": "m",
            "api_key": "sk-old",
            "base_url": f"{operator_api.url}/v1",
        },
    ).json()
    path = f"/api/model-accounts/{made['id']}"
    moved = api.patch(path, {"base_url": f"{foreign.url}/v1", "api_key": "sk-new"}).json()
    assert moved["api_key_cleared"] is False and moved["has_api_key"] is True
    assert api.post(f"{path}/test").json()["ok"] is True
    assert foreign.last.headers["authorization"] == "Bearer sk-new"
    assert "sk-old" not in all_seen(foreign)
    # Other changes keep the key where it was.
    renamed = api.patch(path, {"name": "renamed", "base_url": f"{foreign.url}/v1"}).json()
    assert renamed["api_key_cleared"] is False and renamed["has_api_key"] is True


def test_the_admin_drops_a_key_when_the_base_url_changes(admin_client, owner, operator_api):
    account = model_account_create(
        owner=owner,
        name="a",
        provider="openai",
        model="m",
        api_key="sk-admin-bound",
        base_url=f"{operator_api.url}/v1",
    )
    response = admin_client.post(
        f"/admin/garden/modelaccount/{account.pk}/change/",
        {
            "owner": owner.pk,
            "name": "a",
            "provider": "openai",
            "model": "m",
            "base_url": "https://elsewhere.example/v1",
            "credential": "",
            "timeout_seconds": 60,
            "options": "{}",
        },
    )
    assert response.status_code == 302, response.content
    account.refresh_from_db()
    assert account.base_url == "https://elsewhere.example/v1" and account.api_key_encrypted == ""


def test_the_admin_drops_a_key_when_the_provider_changes(admin_client, owner, operator_api):
    base_url = f"{operator_api.url}/v1"
    account = model_account_create(
        owner=owner,
        name="p",
        provider="openai",
        model="m",
        api_key="sk-for-openai",
        base_url=base_url,
    )
    form = {
        "owner": owner.pk,
        "name": "p",
        "provider": "anthropic",
        "model": "m",
        "base_url": base_url,
        "credential": "",
        "timeout_seconds": 60,
        "options": "{}",
    }
    response = admin_client.post(f"/admin/garden/modelaccount/{account.pk}/change/", form)
    assert response.status_code == 302, response.content
    account.refresh_from_db()
    assert (account.provider, account.api_key_encrypted) == ("anthropic", "")
    # Given again in the same change, the key is kept.
    form.update(provider="openai", api_key="sk-for-openai-again")
    admin_client.post(f"/admin/garden/modelaccount/{account.pk}/change/", form)
    account.refresh_from_db()
    assert api_key_decrypt(account.api_key_encrypted) == "sk-for-openai-again"
