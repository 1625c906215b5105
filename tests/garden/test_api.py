"""The garden API: owner-only reads, CSRF on writes, 400 with a field and a code that writes nothing."""

import pytest

from garden.models import Agent, Conversation, Message, ModelAccount
from tests.support.api import assert_refused

pytestmark = pytest.mark.django_db


def counts():
    return (
        ModelAccount.objects.count(),
        Agent.objects.count(),
        Conversation.objects.count(),
        Message.objects.count(),
    )


@pytest.mark.parametrize(
    ("path", "payload", "field", "code"),
    [
        ("/api/model-accounts", {}, "name", "required"),
        ("/api/model-accounts", {"name": "x", "provider": "nope"}, "provider", "invalid_choice"),
        ("/api/model-accounts", {"name": "x", "provider": "openai"}, "model", "required"),
        (
            "/api/model-accounts",
            {"name": "x", "provider": "openai", "model": "m", "secret_ref": "env:DATABASE_URL"},
            "secret_ref",
            "SECRET_REF_NOT_ACCEPTED",
        ),
        (
            "/api/model-accounts",
            {"name": "x", "provider": "openai", "model": "m", "credential": "nope"},
            "credential",
            "CREDENTIAL_NOT_ALLOWED",
        ),
        ("/api/agents", {"name": "Ledger"}, "handle", "required"),
        ("/api/agents", {"handle": "bad handle!", "name": "L"}, "handle", "invalid"),
        ("/api/agents", {"handle": "concierge", "name": "Dup"}, "handle", "HANDLE_TAKEN"),
        (
            "/api/agents",
            {"handle": "x", "name": "X", "model_account": 999999},
            "model_account",
            "MODEL_ACCOUNT_NOT_FOUND",
        ),
        (
            "/api/agents",
            {"handle": "x", "name": "X", "delegation_allowlist": ["ghost"]},
            "delegation_allowlist",
            "UNKNOWN_AGENT",
        ),
        ("/api/agents", {"handle": "x", "name": "X", "colour": "red"}, "colour", "invalid"),
        ("/api/conversations", {"agent": "abc"}, "agent", "invalid"),
        ("/api/conversations", {"agent": 999999}, "agent", "AGENT_NOT_FOUND"),
    ],
)
def test_bad_input_is_a_400_with_field_and_code_and_writes_nothing(api, path, payload, field, code):
    before = counts()
    assert_refused(api.post(path, payload), 400, code, field=field)
    assert counts() == before


def test_empty_message_is_refused_and_writes_nothing(api, owner):
    agent = Agent.objects.get(owner=owner, handle="concierge")
    conv = api.post("/api/conversations", {"agent": agent.pk}).json()
    before = counts()
    assert_refused(
        api.post(f"/api/conversations/{conv['id']}/messages", {"text": "   "}),
        400,
        "blank",
        field="text",
    )
    assert_refused(
        api.post(f"/api/conversations/{conv['id']}/messages", {}), 400, "required", field="text"
    )
    assert counts() == before


def test_writes_without_csrf_are_forbidden_and_write_nothing(api):
    before = counts()
    response = api.post("/api/agents", {"handle": "ledger", "name": "Ledger"}, csrf=False)
    assert response.status_code == 403
    assert "CSRF" in response.json()["message"]
    assert counts() == before


def test_anonymous_is_refused(client):
    assert client.get("/api/agents").status_code == 403


def test_model_account_output_never_carries_a_key(api):
    response = api.post(
        "/api/model-accounts",
        {
            "name": "OpenAI",
            "provider": "openai",
            "model": "gpt-4o-mini",
            "api_key": "sk-secret-value",
        },
    )
    assert response.status_code == 201, response.content
    assert "sk-secret-value" not in response.content.decode()
    listing = api.get("/api/model-accounts").content.decode()
    assert "sk-secret-value" not in listing
    mine = next(a for a in api.get("/api/model-accounts").json() if a["name"] == "OpenAI")
    assert mine["key"]["source"] == "own" and mine["has_api_key"] is True


def test_create_agent_and_list_only_ones_own(api, owner, stranger):
    created = api.post(
        "/api/agents", {"handle": "ledger", "name": "Ledger", "delegation_allowlist": ["concierge"]}
    )
    assert created.status_code == 201, created.content
    assert created.json()["delegation_allowlist"] == ["concierge"]
    handles = {a["handle"] for a in api.get("/api/agents").json()}
    assert handles == {"father", "concierge", "ledger"}
    assert Agent.objects.filter(owner=stranger).count() == 2


def test_another_users_conversation_is_404(api, stranger):
    theirs = Conversation.objects.create(
        owner=stranger, agent=Agent.objects.get(owner=stranger, handle="concierge")
    )
    assert api.get(f"/api/conversations/{theirs.pk}/messages").status_code == 404
    before = counts()
    assert api.post(f"/api/conversations/{theirs.pk}/messages", {"text": "hi"}).status_code == 404
    assert counts() == before


def test_posting_stores_the_owner_turn_and_answers_202(
    api, owner, django_capture_on_commit_callbacks
):
    agent = Agent.objects.get(owner=owner, handle="concierge")
    conv = api.post("/api/conversations", {"agent": agent.pk}).json()
    with django_capture_on_commit_callbacks() as callbacks:
        response = api.post(f"/api/conversations/{conv['id']}/messages", {"text": "hello"})
    assert response.status_code == 202
    body = response.json()
    assert body["message"]["speaker"]["kind"] == "owner" and body["message"]["seq"] == 1
    assert body["request"]["state"] == "queued"
    assert body["request"]["conversation"] == conv["id"]
    # The start of the request and the live events wait for commit: nothing before.
    assert callbacks


def test_openapi_schema_is_served(api):
    response = api.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200


@pytest.mark.django_db
def test_refusals_are_worded_for_a_person_not_the_framework(api):
    bad = api.post("/api/agents", {"handle": "Ledger Two", "name": "L"}).json()
    (error,) = [e for e in bad["errors"] if e["field"] == "handle"]
    assert error["code"] == "invalid"
    assert "slug" not in error["message"]
    assert "letters, digits, - and _" in error["message"]
    huge = api.client.post(
        "/api/agents",
        data='{"handle": "h", "name": "n", "model_account": 1' + "0" * 30 + "}",
        content_type="application/json",
        HTTP_X_CSRFTOKEN=api.token,
    ).json()
    assert huge["code"] == "INVALID_NUMBER"
    assert "64 bits" not in huge["message"] and "too large for a number" in huge["message"]
