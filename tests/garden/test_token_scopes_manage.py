"""What a token cannot take back needs ``manage``: deciding an approval, changing an agent's
approval rules, and replacing or dropping a stored secret (a model account's key, an MCP
server's headers). A token with the default scopes (read, write) is refused by name
(403 TOKEN_SCOPE) and nothing changes; with ``manage`` each goes through, and harmless
changes still need only ``write``. A signed-in session is not limited by scopes."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from garden.credentials import api_key_decrypt
from garden.models import Agent, McpServer, ModelAccount
from garden.services.accounts import model_account_create, scripted_account_for
from garden.services.agents import agent_create
from garden.services.tokens import token_create
from groups.models import Approval, GroupRequest
from groups.services.requests import request_create
from tests.groups.conftest import make_group
from tests.mcp_server import mcp_server

pytestmark = pytest.mark.django_db

MANAGE = ["read", "write", "manage"]


def bearer(owner, scopes=None) -> APIClient:
    made = token_create(owner=owner, name="ci", **({"scopes": scopes} if scopes else {}))
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {made.secret}")
    return client


def assert_needs_manage(response) -> None:
    assert response.status_code == 403, response.content
    body = response.json()
    assert body["code"] == "TOKEN_SCOPE" and "'manage'" in body["message"], body


# --- approvals ------------------------------------------------------------------------------


@pytest.fixture
def pending(owner):
    group = make_group(owner, concierge_rules=[], members={"ledger": []})
    request = request_create(group=group, text="hello")
    GroupRequest.objects.filter(pk=request.pk).update(state="awaiting_approval")
    return Approval.objects.create(
        owner=owner,
        request=request,
        conversation=request.conversation,
        agent=group.memberships.get(agent__handle="ledger").agent,
        tool_call_id="call_1",
        action={"name": "file.write", "arguments": {"title": "t", "content": "c"}},
    )


def test_deciding_an_approval_needs_manage(owner, pending):
    path = f"/api/approvals/{pending.pk}/decide"
    chosen = {"title": "t", "content": "send it all to me"}
    for body in (
        {"decision": "approve", "arguments": chosen},
        {"decision": "approve"},
        {"decision": "reject"},
    ):
        assert_needs_manage(bearer(owner).post(path, body, format="json"))
    pending.refresh_from_db()
    assert (pending.status, pending.decided_at) == ("pending", None)

    decided = bearer(owner, MANAGE).post(path, {"decision": "approve"}, format="json")
    assert decided.status_code == 200, decided.content
    assert decided.json()["status"] == "approved" and decided.json()["surface"] == "api"


# --- an agent's approval rules ----------------------------------------------------------------


@pytest.fixture
def writer(owner):
    return agent_create(
        owner=owner,
        handle="writer",
        name="Writer",
        model_account=scripted_account_for(owner=owner),
        enabled_tools=["file.write", "http.fetch"],
        approval_tools=["file.write"],
    )


def rules(agent: Agent) -> tuple:
    agent.refresh_from_db()
    return (agent.enabled_tools, agent.approval_tools, agent.tool_approvals)


@pytest.mark.parametrize(
    "change",
    [
        {"approval_tools": []},
        {"approval_tools": ["file.write", "http.fetch"]},
        # Taking the tool away takes its rule with it: put back, it would run unasked.
        {"enabled_tools": ["http.fetch"]},
        {"name": "Still Writer", "approval_tools": ["http.fetch"]},
    ],
)
def test_changing_an_agents_approval_rules_needs_manage(owner, writer, change):
    before = (writer.name, *rules(writer))
    assert_needs_manage(bearer(owner).patch(f"/api/agents/{writer.pk}", change, format="json"))
    writer.refresh_from_db()
    assert (writer.name, *rules(writer)) == before

    changed = bearer(owner, MANAGE).patch(f"/api/agents/{writer.pk}", change, format="json")
    assert changed.status_code == 200, changed.content
    assert rules(writer) != before[1:]


def test_a_write_token_still_changes_what_leaves_the_approval_rules_as_they_are(owner, writer):
    before = rules(writer)
    script = bearer(owner)
    for change in (
        {"name": "Scribe", "instructions": "Write briefly."},
        # The rules sent as they are (a client sending the whole agent back) change nothing.
        {"approval_tools": ["file.write"], "enabled_tools": ["http.fetch", "file.write"]},
        {"enabled_tools": ["file.write", "http.fetch", "file.read"]},
    ):
        response = script.patch(f"/api/agents/{writer.pk}", change, format="json")
        assert response.status_code == 200, (change, response.content)
    writer.refresh_from_db()
    assert writer.name == "Scribe" and writer.approval_tools == before[1]
    assert "file.read" in writer.enabled_tools


def test_a_session_changes_the_approval_rules_without_a_token(api, owner, writer):
    response = api.patch(f"/api/agents/{writer.pk}", {"approval_tools": []})
    assert response.status_code == 200, response.content
    assert rules(writer)[1] == []


# --- MCP servers and their tools' approval policies ------------------------------------------


@pytest.fixture
def tracker(settings):
    settings.GARDEN_EGRESS_ALLOW_MCP = ["127.0.0.1"]
    with mcp_server() as first, mcp_server() as second:
        yield first, second


def test_an_mcp_tools_policy_and_the_servers_secrets_need_manage(api, owner, tracker):
    first, second = tracker
    made = api.post(
        "/api/mcp-servers",
        {"name": "tracker", "url": first.url, "headers": {"X-Api-Key": "k1"}},
    )
    assert made.status_code == 201, made.content
    server = made.json()["id"]
    clerk = agent_create(
        owner=owner,
        handle="clerk",
        name="Clerk",
        model_account=scripted_account_for(owner=owner),
        enabled_tools=["mcp.tracker.lookup", "mcp.tracker.delete_record"],
        tool_approvals={"mcp.tracker.delete_record": "always"},
    )
    script = bearer(owner)
    for change in (
        {"tool_approvals": {"mcp.tracker.delete_record": "never"}},
        {"tool_approvals": {}},
        {"enabled_tools": ["mcp.tracker.lookup"]},
    ):
        assert_needs_manage(script.patch(f"/api/agents/{clerk.pk}", change, format="json"))
    for change in (
        {"url": second.url},  # another origin: drops the headers and the tools' policies
        {"headers": {"X-Api-Key": "k2"}},
        {"clear_headers": True},
    ):
        assert_needs_manage(script.patch(f"/api/mcp-servers/{server}", change, format="json"))
    assert rules(clerk)[2] == {"mcp.tracker.delete_record": "always"}
    row = McpServer.objects.get(pk=server)
    assert (row.url, row.header_names) == (first.url, ["X-Api-Key"])
    assert second.seen_headers == []  # refused before anything was listed there

    assert script.post(f"/api/mcp-servers/{server}/refresh").status_code == 200

    manager = bearer(owner, MANAGE)
    policy = {"tool_approvals": {"mcp.tracker.delete_record": "never"}}
    assert manager.patch(f"/api/agents/{clerk.pk}", policy, format="json").status_code == 200
    assert rules(clerk)[2] == {"mcp.tracker.delete_record": "never"}
    moved = manager.patch(f"/api/mcp-servers/{server}", {"url": second.url}, format="json")
    assert moved.status_code == 200, moved.content
    assert moved.json()["headers_cleared"] is True and rules(clerk)[2] == {}


def test_a_write_token_makes_an_agent_only_with_approvals_at_least_as_strict_as_by_default(
    owner, tracker
):
    """An agent made with a tool's approval off is an approval switched off: a write token may
    make agents with built-in tools asking approval and MCP tools asking always or by their
    annotations (the default), never one that runs a tool unasked."""
    first, _second = tracker
    made = bearer(owner, MANAGE).post(
        "/api/mcp-servers", {"name": "tracker", "url": first.url}, format="json"
    )
    assert made.status_code == 201, made.content
    tools = ["mcp.tracker.lookup", "mcp.tracker.delete_record", "file.write"]
    script = bearer(owner)

    def make(handle, **rules):
        body = {"handle": handle, "name": handle.title(), "enabled_tools": tools, **rules}
        return script.post("/api/agents", body, format="json")

    assert_needs_manage(make("loose", tool_approvals={"mcp.tracker.delete_record": "never"}))
    assert not Agent.objects.filter(handle="loose").exists()
    strict = make(
        "strict",
        approval_tools=["file.write"],
        tool_approvals={"mcp.tracker.lookup": "always", "mcp.tracker.delete_record": "annotations"},
    )
    assert strict.status_code == 201, strict.content
    assert make("plain").status_code == 201
    loose = bearer(owner, MANAGE).post(
        "/api/agents",
        {
            "handle": "loose",
            "name": "Loose",
            "enabled_tools": tools,
            "tool_approvals": {"mcp.tracker.delete_record": "never"},
        },
        format="json",
    )
    assert loose.status_code == 201, loose.content


# --- model account keys ---------------------------------------------------------------------


@pytest.fixture
def keyed(owner, settings, monkeypatch):
    settings.GARDEN_EGRESS_ALLOW_PROVIDERS = ["127.0.0.1"]
    monkeypatch.setenv("GARDEN_TEST_OPERATOR_KEY", "sk-operator-secret")
    settings.GARDEN_CREDENTIALS = {
        "shared": {
            "provider": "openai",
            "env": "GARDEN_TEST_OPERATOR_KEY",
            "base_url": "",
            "users": "*",
        }
    }
    return model_account_create(
        owner=owner, name="Mine", provider="openai", model="m", api_key="sk-pasted-0123"
    )


def key_of(account: ModelAccount) -> tuple:
    account.refresh_from_db()
    kept = api_key_decrypt(account.api_key_encrypted) if account.api_key_encrypted else ""
    return (account.name, account.base_url, account.credential, kept)


@pytest.mark.parametrize(
    "change",
    [
        {"api_key": "sk-theirs-4567"},
        {"clear_api_key": True},
        {"credential": "shared"},
        {"base_url": "http://127.0.0.1:9/v1"},  # a key never follows the account elsewhere
        {"name": "Renamed", "api_key": "sk-theirs-4567"},
    ],
)
def test_replacing_or_dropping_a_stored_key_needs_manage(owner, keyed, change):
    before = key_of(keyed)
    assert before[3] == "sk-pasted-0123"
    path = f"/api/model-accounts/{keyed.pk}"
    assert_needs_manage(bearer(owner).patch(path, change, format="json"))
    assert key_of(keyed) == before

    changed = bearer(owner, MANAGE).patch(path, change, format="json")
    assert changed.status_code == 200, changed.content
    assert key_of(keyed)[3] != "sk-pasted-0123"


def test_a_write_token_still_changes_an_account_and_keeps_its_key(owner, keyed):
    path = f"/api/model-accounts/{keyed.pk}"
    changed = bearer(owner).patch(
        path, {"name": "Renamed", "model": "m2", "timeout_seconds": 30}, format="json"
    )
    assert changed.status_code == 200, changed.content
    assert changed.json()["api_key_cleared"] is False
    assert key_of(keyed) == ("Renamed", "", "", "sk-pasted-0123")
    # Without a stored key, nothing is lost by a new base URL.
    bare = model_account_create(owner=owner, name="Bare", provider="openai", model="m")
    moved = bearer(owner).patch(
        f"/api/model-accounts/{bare.pk}", {"base_url": "http://127.0.0.1:9/v1"}, format="json"
    )
    assert moved.status_code == 200, moved.content
