"""Servers the operator offers (GARDEN_MCP_SERVERS): remote ones with headers read from the
worker's environment, local ones over stdio (the operator's alone to configure), each offered
to everyone or to named users; a malformed setting is named at start-up."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from django.core.checks import run_checks

from garden.errors import ServiceError
from garden.models import Conversation
from garden.services.accounts import scripted_account_for
from garden.services.agents import agent_create
from garden.tools import ToolContext, get_tool, run_tool
from garden.tools.mcp_operator import parse_operator_servers
from tests.mcp_server import mcp_server

pytestmark = pytest.mark.django_db

STDIO_SERVER = str(Path(__file__).resolve().parent.parent / "mcp_stdio_server.py")


def run_as(user, name, arguments):
    agent = agent_create(
        owner=user,
        handle="clerk",
        name="Clerk",
        model_account=scripted_account_for(owner=user),
        enabled_tools=[name],
    )
    conversation = Conversation.objects.create(owner=user, agent=agent)
    ctx = ToolContext(owner_id=user.pk, agent_id=agent.pk, conversation_id=conversation.pk)
    return run_tool(ctx, name, arguments)


def test_a_remote_server_offered_to_named_users_only(api, owner, stranger, settings, monkeypatch):
    # The site's server is reachable for the site's use alone: GARDEN_EGRESS_ALLOW_MCP (what
    # owners' servers may reach) stays empty.
    monkeypatch.setenv("SITE_TRACKER_TOKEN", "Bearer site-secret")
    with mcp_server(token="site-secret") as server:
        settings.GARDEN_MCP_SERVERS = {
            "site": {
                "url": server.url,
                "headers": {"Authorization": "env:SITE_TRACKER_TOKEN"},
                "users": ["owner"],
            }
        }
        # The header's value reaches the server; the variable's value is never shown.
        listed = api.get("/api/mcp-servers").json()
        assert [(s["name"], s["offered_by"], s["id"]) for s in listed] == [
            ("site", "operator", None)
        ]
        assert "site-secret" not in str(listed)
        assert any(t["agent_tool"] == "mcp.site.lookup" for t in listed[0]["tools"])
        outcome = run_as(owner, "mcp.site.lookup", {"query": "rent"})
        assert not outcome.is_error, outcome.content
        assert server.calls == [("lookup", {"query": "rent"})]
        # Not offered to the stranger: not listed, not usable.
        assert get_tool("mcp.site.lookup", owner_id=stranger.pk) is None
        with pytest.raises(ServiceError) as refused:
            run_as(stranger, "mcp.site.lookup", {"query": "rent"})
        assert refused.value.code == "UNKNOWN_TOOL"
        # An owner cannot reach the site's server as a server of its own, and the site's names
        # are not told to anyone by a refusal.
        own = api.post("/api/mcp-servers", {"name": "site", "url": server.url})
        assert own.status_code == 400
        assert own.json()["code"] == "EGRESS_REFUSED"
        assert len(server.calls) == 1


def test_a_local_stdio_server_is_the_operators_to_run(owner, settings, monkeypatch):
    monkeypatch.setenv("GARDEN_TEST_TEAM", "the garden team")
    settings.GARDEN_MCP_SERVERS = {
        "local": {
            "command": sys.executable,
            "args": [STDIO_SERVER],
            "env": {"TEAM_NAME": "env:GARDEN_TEST_TEAM"},
            "users": "*",
        }
    }
    outcome = run_as(owner, "mcp.local.greet", {"name": "Ada"})
    assert not outcome.is_error, outcome.content
    assert "hello Ada from the garden team" in outcome.content


def test_an_owner_cannot_add_a_local_command(api, owner):
    from garden.api.serializers import McpServerInput

    # The API has no field for a command: a server of an owner's is a URL, http(s) only.
    assert "command" not in McpServerInput().fields
    response = api.post("/api/mcp-servers", {"name": "cmd", "url": "file:///bin/sh"})
    assert response.status_code == 400
    assert response.json()["code"] == "INVALID_URL"
    assert api.get("/api/mcp-servers").json() == []


@pytest.mark.parametrize(
    "config, problem",
    [
        ({"Bad Name": {"url": "https://x.example/mcp", "users": "*"}}, "lower-case"),
        ({"s": {"url": "https://x.example/mcp"}}, "say who may use it"),
        ({"s": {"url": "https://x.example/mcp", "command": "x", "users": "*"}}, "exactly one"),
        ({"s": {"url": "https://x.example", "headers": {"A": "plain"}, "users": "*"}}, "env:"),
        ({"s": {"url": "https://x.example", "users": "*", "shell": True}}, "unknown fields"),
    ],
)
def test_a_malformed_setting_is_named_at_start_up(settings, config, problem):
    with pytest.raises(ValueError, match=problem):
        parse_operator_servers(config)
    settings.GARDEN_MCP_SERVERS = config
    errors = [e for e in run_checks() if e.id == "garden.E010"]
    assert errors and problem in errors[0].msg
