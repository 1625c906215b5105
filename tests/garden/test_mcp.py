"""An owner's MCP servers, against a real MCP server (the SDK's FastMCP over Streamable HTTP on
127.0.0.1): adding one lists its tools, refusals are named and store nothing, secrets are
write-only and never follow the server elsewhere, another owner sees nothing, and a tool call
is validated, bounded and named when it fails."""

from __future__ import annotations

import pytest

from garden.models import Agent, Artifact, AttachmentData, Conversation, McpServer
from garden.services.accounts import scripted_account_for
from garden.services.agents import agent_create, agent_update
from garden.tools import ToolContext, get_tool, needs_approval, run_tool
from tests.mcp_server import mcp_server, serving

pytestmark = pytest.mark.django_db


@pytest.fixture
def loopback_mcp(settings):
    """The operator allows MCP servers on 127.0.0.1 (GARDEN_EGRESS_ALLOW_MCP), as for an
    internal one; http.fetch and model accounts stay refused there."""
    settings.GARDEN_EGRESS_ALLOW_MCP = ["127.0.0.1"]


@pytest.fixture
def tracker(loopback_mcp):
    with mcp_server() as server:
        yield server


def add(api, server, name="tracker", **extra):
    return api.post("/api/mcp-servers", {"name": name, "url": server.url, **extra})


def ctx_for(owner, agent) -> ToolContext:
    conversation = Conversation.objects.create(owner=owner, agent=agent)
    return ToolContext(owner_id=owner.pk, agent_id=agent.pk, conversation_id=conversation.pk)


def test_adding_a_server_lists_its_tools_and_keeps_them(api, owner, tracker):
    response = add(api, tracker)
    assert response.status_code == 201, response.json()
    body = response.json()
    tools = {t["name"]: t for t in body["tools"]}
    assert {"lookup", "delete_record", "slow", "huge", "picture"} <= set(tools)
    assert tools["lookup"]["agent_tool"] == "mcp.tracker.lookup"
    assert tools["lookup"]["annotations"] == {"readOnlyHint": True}
    assert tools["delete_record"]["annotations"]["destructiveHint"] is True
    assert tools["delete_record"]["input_schema"]["properties"]["record_id"]["type"] == "integer"
    assert McpServer.objects.get(owner=owner).tools == [
        {k: v for k, v in t.items() if k != "agent_tool"} for t in body["tools"]
    ]
    listed = api.get("/api/mcp-servers").json()
    assert [s["name"] for s in listed] == ["tracker"]
    assert tracker.calls == []  # listing calls no tool


def test_a_bearer_token_reaches_the_server_and_is_never_returned(api, owner, loopback_mcp):
    with mcp_server(token="s3cret-token") as server:
        refused = add(api, server, name="locked")
        assert refused.status_code == 400
        assert refused.json()["code"] == "MCP_AUTH_FAILED"
        assert not McpServer.objects.exists()
        response = add(api, server, name="locked", bearer_token="s3cret-token")
        assert response.status_code == 201, response.json()
    row = McpServer.objects.get()
    assert "s3cret-token" not in row.headers_encrypted
    assert row.header_names == ["Authorization"]
    assert "s3cret-token" not in response.content.decode()
    assert response.json()["header_names"] == ["Authorization"]


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.7/mcp",
        "http://169.254.169.254/mcp",
        "http://[fd00::1]/mcp",
        "http://localhost:1/mcp",
    ],
)
def test_a_server_on_a_private_address_is_refused_before_any_connection(api, owner, url):
    response = api.post("/api/mcp-servers", {"name": "inside", "url": url})
    assert response.status_code == 400
    assert response.json()["code"] == "EGRESS_REFUSED"
    assert not McpServer.objects.exists()


def test_loopback_is_refused_unless_the_operator_allows_it_and_nothing_connects(api, owner):
    with mcp_server() as server:
        response = add(api, server)
        assert response.status_code == 400
        assert response.json()["code"] == "EGRESS_REFUSED"
        assert "GARDEN_EGRESS_ALLOW_MCP" in response.json()["message"]
        assert server.seen_headers == []  # refused before any connection
    assert not McpServer.objects.exists()


def test_a_server_that_does_not_speak_mcp_is_refused_by_name(api, owner, loopback_mcp):
    async def html(scope, receive, send):
        if scope["type"] != "http":
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/html")],
            }
        )
        await send({"type": "http.response.body", "body": b"<html>a blog</html>"})

    with serving(html) as url:
        response = api.post("/api/mcp-servers", {"name": "blog", "url": url})
    assert response.status_code == 400
    assert response.json()["code"] == "MCP_NOT_MCP"
    assert not McpServer.objects.exists()


def test_a_server_that_cannot_be_reached_is_refused_by_name(api, owner, loopback_mcp):
    from tests.mcp_server import free_port

    url = f"http://127.0.0.1:{free_port()}/mcp"
    response = api.post("/api/mcp-servers", {"name": "gone", "url": url})
    assert response.status_code == 400
    assert response.json()["code"] == "MCP_UNREACHABLE"
    assert not McpServer.objects.exists()


def test_bad_names_and_headers_are_refused_and_store_nothing(api, owner, tracker):
    for body, code in [
        ({"name": "Has Spaces", "url": tracker.url}, "INVALID_NAME"),
        ({"name": "a.b", "url": tracker.url}, "INVALID_NAME"),
        ({"name": "ok", "url": "ftp://example.com/mcp"}, "INVALID_URL"),
        ({"name": "ok", "url": tracker.url, "headers": {"Host": "x"}}, "INVALID_HEADERS"),
        ({"name": "ok", "url": tracker.url, "headers": {"X-Key": "a\r\nb"}}, "INVALID_HEADERS"),
    ]:
        response = api.post("/api/mcp-servers", body)
        assert response.status_code == 400, body
        assert response.json()["code"] == code, (body, response.json())
    assert not McpServer.objects.exists()
    assert add(api, tracker).status_code == 201
    again = add(api, tracker)
    assert again.status_code == 400
    assert again.json()["code"] == "NAME_TAKEN"


def test_the_number_of_servers_is_limited_per_owner(api, owner, tracker, settings):
    settings.GARDEN_MAX_MCP_SERVERS_PER_OWNER = 1
    assert add(api, tracker, name="one").status_code == 201
    response = add(api, tracker, name="two")
    assert response.status_code == 409
    assert response.json()["code"] == "MCP_SERVER_LIMIT"
    assert McpServer.objects.count() == 1


def test_a_new_origin_drops_the_stored_headers(api, owner, loopback_mcp):
    with mcp_server() as first, mcp_server() as second:
        created = add(api, first, headers={"X-Api-Key": "k1"}).json()
        changed = api.patch(f"/api/mcp-servers/{created['id']}", {"url": second.url})
        assert changed.status_code == 200, changed.json()
        assert changed.json()["headers_cleared"] is True
        assert changed.json()["header_names"] == []
        # The listing on the new origin was sent without the old secret.
        assert all("x-api-key" not in h for h in second.seen_headers)
        assert any(h.get("x-api-key") == "k1" for h in first.seen_headers)


def test_another_owner_cannot_see_test_change_remove_or_use_the_server(
    api, owner, stranger, tracker
):
    from rest_framework.test import APIClient

    from tests.conftest import CsrfClient

    server_id = add(api, tracker).json()["id"]
    other = APIClient(enforce_csrf_checks=True)
    other.force_login(stranger)
    other = CsrfClient(other)
    assert other.get("/api/mcp-servers").json() == []
    assert other.get(f"/api/mcp-servers/{server_id}").status_code == 404
    assert other.post(f"/api/mcp-servers/{server_id}/refresh").status_code == 404
    assert other.patch(f"/api/mcp-servers/{server_id}", {"url": tracker.url}).status_code == 404
    assert other.delete(f"/api/mcp-servers/{server_id}").status_code == 404
    account = scripted_account_for(owner=stranger)
    refused = other.post(
        "/api/agents",
        {
            "handle": "thief",
            "name": "Thief",
            "model_account": account.pk,
            "enabled_tools": ["mcp.tracker.lookup"],
        },
    )
    assert refused.status_code == 400
    assert refused.json()["code"] == "UNKNOWN_TOOL"
    assert get_tool("mcp.tracker.lookup", owner_id=stranger.pk) is None
    thief = agent_create(owner=stranger, handle="thief", name="Thief", model_account=account)
    outcome = run_tool(ctx_for(stranger, thief), "mcp.tracker.lookup", {"query": "rent"})
    assert outcome.code == "TOOL_NOT_AVAILABLE"
    assert tracker.calls == []
    assert McpServer.objects.filter(pk=server_id).exists()


@pytest.fixture
def clerk(api, owner, tracker):
    """Clerk, with the tracker's tools enabled."""
    assert add(api, tracker).status_code == 201
    names = [f"mcp.tracker.{n}" for n in ("lookup", "delete_record", "slow", "huge", "picture")]
    return agent_create(
        owner=owner,
        handle="clerk",
        name="Clerk",
        model_account=scripted_account_for(owner=owner),
        enabled_tools=names,
    )


def test_a_call_runs_on_the_server_with_the_arguments(owner, clerk, tracker):
    outcome = run_tool(ctx_for(owner, clerk), "mcp.tracker.lookup", {"query": "rent"})
    assert not outcome.is_error, outcome.content
    assert "record for rent: balance 1400" in outcome.content
    assert tracker.calls == [("lookup", {"query": "rent"})]


def test_arguments_that_fail_the_schema_are_a_named_error_and_nothing_is_sent(
    owner, clerk, tracker
):
    outcome = run_tool(ctx_for(owner, clerk), "mcp.tracker.delete_record", {"record_id": "all"})
    assert outcome.code == "INVALID_TOOL_ARGUMENTS"
    assert "record_id" in outcome.content
    assert tracker.calls == []


def test_a_server_that_hangs_is_a_timeout_within_the_deadline(owner, clerk, tracker, settings):
    settings.GARDEN_MCP_TIMEOUT = 1.0
    outcome = run_tool(ctx_for(owner, clerk), "mcp.tracker.slow", {})
    assert outcome.is_error
    assert outcome.code == "MCP_TIMEOUT"
    assert "slow on tracker" in outcome.content


def test_a_twenty_megabyte_result_is_refused_unread(owner, clerk, tracker, settings):
    settings.GARDEN_MCP_TIMEOUT = 30.0
    outcome = run_tool(ctx_for(owner, clerk), "mcp.tracker.huge", {})
    assert outcome.is_error
    assert outcome.code == "MCP_RESULT_TOO_LARGE"
    assert len(outcome.content) < 1_000
    assert tracker.names() == ["huge"]


def test_a_picture_is_kept_as_an_artifact_of_the_thread(owner, clerk, tracker):
    ctx = ctx_for(owner, clerk)
    outcome = run_tool(ctx, "mcp.tracker.picture", {})
    assert not outcome.is_error, outcome.content
    (artifact_id,) = outcome.artifacts
    artifact = Artifact.objects.get(pk=artifact_id)
    assert (artifact.kind, artifact.mime_type, artifact.conversation_id, artifact.agent_id) == (
        "image",
        "image/png",
        ctx.conversation_id,
        clerk.pk,
    )
    assert AttachmentData.objects.get(artifact=artifact).data.startswith(b"\x89PNG")
    assert f"artifact {artifact_id}" in outcome.content


def test_a_tool_error_of_the_server_is_a_named_tool_error(owner, clerk, tracker):
    agent_update(agent=clerk, enabled_tools=[*clerk.enabled_tools, "mcp.tracker.broken"])
    outcome = run_tool(ctx_for(owner, clerk), "mcp.tracker.broken", {})
    assert outcome.is_error
    assert outcome.code == "MCP_TOOL_ERROR"
    assert "the tracker is down" in outcome.content


def approval(agent: Agent, name: str) -> bool:
    agent.refresh_from_db()
    return needs_approval(
        name=name,
        approval_tools=agent.approval_tools,
        tool_approvals=agent.tool_approvals,
        owner_id=agent.owner_id,
    )


def test_approval_follows_the_annotations_by_default_and_the_owners_policy_over_them(api, clerk):
    assert approval(clerk, "mcp.tracker.lookup") is False  # readOnlyHint
    assert approval(clerk, "mcp.tracker.delete_record") is True  # destructiveHint
    assert approval(clerk, "mcp.tracker.slow") is True  # says nothing: approval
    response = api.patch(
        f"/api/agents/{clerk.pk}",
        {"tool_approvals": {"mcp.tracker.lookup": "always", "mcp.tracker.delete_record": "never"}},
    )
    assert response.status_code == 200, response.json()
    assert response.json()["tool_approvals"]["mcp.tracker.lookup"] == "always"
    assert approval(clerk, "mcp.tracker.lookup") is True
    assert approval(clerk, "mcp.tracker.delete_record") is False


def test_bad_tool_approvals_are_refused_by_name(api, clerk):
    for body, code in [
        ({"tool_approvals": {"mcp.tracker.lookup": "sometimes"}}, "invalid_choice"),
        ({"tool_approvals": {"mcp.tracker.broken": "never"}}, "TOOL_NOT_ENABLED"),
        ({"tool_approvals": {"file.write": "never"}}, "TOOL_NOT_ENABLED"),
        ({"approval_tools": ["mcp.tracker.lookup"]}, "USE_TOOL_APPROVALS"),
    ]:
        response = api.patch(f"/api/agents/{clerk.pk}", body)
        assert response.status_code == 400, body
        codes = {e["code"] for e in response.json().get("errors", [])} | {response.json()["code"]}
        assert code in codes, (body, response.json())


def test_removing_a_server_takes_its_tools_from_the_agents(api, clerk):
    server_id = McpServer.objects.get().pk
    api.patch(f"/api/agents/{clerk.pk}", {"tool_approvals": {"mcp.tracker.lookup": "never"}})
    assert api.delete(f"/api/mcp-servers/{server_id}").status_code == 204
    clerk.refresh_from_db()
    assert clerk.enabled_tools == []
    assert clerk.tool_approvals == {}


def test_refresh_lists_again_and_a_failure_keeps_what_was_listed(api, owner, loopback_mcp):
    with mcp_server() as server:
        created = add(api, server).json()
        again = api.post(f"/api/mcp-servers/{created['id']}/refresh")
        assert again.status_code == 200
        assert {t["name"] for t in again.json()["tools"]} == {t["name"] for t in created["tools"]}
    gone = api.post(f"/api/mcp-servers/{created['id']}/refresh")
    assert gone.status_code == 400
    assert gone.json()["code"] == "MCP_UNREACHABLE"
    assert len(McpServer.objects.get().tools) == len(created["tools"])


def test_staff_see_a_server_in_the_admin_without_its_headers_and_removing_it_cleans_agents(
    api, owner, clerk, admin_client
):
    from django.contrib.auth import get_user_model

    server = McpServer.objects.get()
    McpServer.objects.filter(pk=server.pk).update(header_names=["Authorization"])
    page = admin_client.get(f"/admin/garden/mcpserver/{server.pk}/change/")
    assert page.status_code == 200
    assert "tracker" in page.content.decode()
    assert "headers_encrypted" not in page.content.decode()
    assert admin_client.get("/admin/garden/mcpserver/add/").status_code == 403
    response = admin_client.post(f"/admin/garden/mcpserver/{server.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not McpServer.objects.exists()
    clerk.refresh_from_db()
    assert clerk.enabled_tools == []
    assert get_user_model().objects.filter(pk=owner.pk).exists()


def test_a_tool_slower_than_httpxs_own_timeout_answers_within_garden_s(
    owner, clerk, tracker, settings
):
    """httpx gives up on a read after 5 s by default; the call's deadline is garden's."""
    settings.GARDEN_MCP_TIMEOUT = 30.0
    agent_update(agent=clerk, enabled_tools=[*clerk.enabled_tools, "mcp.tracker.wait"])
    outcome = run_tool(ctx_for(owner, clerk), "mcp.tracker.wait", {"seconds": 6})
    assert not outcome.is_error, outcome.content
    assert "waited 6 s" in outcome.content


def test_an_answer_stands_when_the_sessions_teardown_stalls(owner, settings, loopback_mcp, api):
    """A stateful server that never answers the session's closing DELETE: the call's answer
    came, and is not turned into a timeout by what follows it."""
    settings.GARDEN_MCP_TIMEOUT = 3.0
    with mcp_server(stateful=True, stall_delete=True) as server:
        assert add(api, server, name="sticky").status_code == 201
        agent = agent_create(
            owner=owner,
            handle="sticky",
            name="Sticky",
            model_account=scripted_account_for(owner=owner),
            enabled_tools=["mcp.sticky.lookup"],
        )
        outcome = run_tool(ctx_for(owner, agent), "mcp.sticky.lookup", {"query": "rent"})
        assert not outcome.is_error, outcome.content
        assert "balance 1400" in outcome.content
        assert server.calls == [("lookup", {"query": "rent"})]


def test_a_pattern_that_backtracks_is_refused_within_a_bound_and_nothing_is_sent(
    owner, clerk, tracker
):
    import time

    agent_update(agent=clerk, enabled_tools=[*clerk.enabled_tools, "mcp.tracker.strict"])
    started = time.monotonic()
    outcome = run_tool(ctx_for(owner, clerk), "mcp.tracker.strict", {"code": "a" * 40 + "!"})
    assert outcome.code == "INVALID_TOOL_ARGUMENTS"
    assert "took too long" in outcome.content
    assert time.monotonic() - started < 5  # unbounded, this match runs for hours
    assert tracker.calls == []
    fine = run_tool(ctx_for(owner, clerk), "mcp.tracker.strict", {"code": "aaa"})
    assert not fine.is_error, fine.content


@pytest.mark.parametrize(
    "schema, why",
    [
        (
            {"type": "object", "properties": {"a": {"$ref": "https://x.invalid/s"}}},
            "refers outside",
        ),
        ({"type": "object", "patternProperties": {"^(a|a)+$": {}}}, "patternProperties"),
        ({"type": "array"}, "not an object schema"),
        ({"type": "object", "properties": {"a": {"type": "nonsense"}}}, "not valid JSON Schema"),
    ],
)
def test_a_schema_garden_cannot_apply_makes_its_tool_unusable(schema, why):
    from garden.tools.mcp_catalog import usable

    assert why in usable("tracker", {"name": "tool", "input_schema": schema})
    assert (
        usable(
            "tracker",
            {
                "name": "tool",
                "input_schema": {
                    "type": "object",
                    "$defs": {"x": {}},
                    "properties": {"a": {"$ref": "#/$defs/x"}},
                },
            },
        )
        is None
    )


def test_pictures_are_kept_up_to_a_cap_and_only_real_pictures(owner, clerk, tracker):
    from garden.tools.mcp import MAX_PICTURES

    agent_update(agent=clerk, enabled_tools=[*clerk.enabled_tools, "mcp.tracker.gallery"])
    ctx = ctx_for(owner, clerk)
    outcome = run_tool(ctx, "mcp.tracker.gallery", {"count": MAX_PICTURES + 3})
    assert not outcome.is_error, outcome.content
    assert len(outcome.artifacts) == MAX_PICTURES
    assert Artifact.objects.filter(conversation_id=ctx.conversation_id).count() == MAX_PICTURES
    assert "2 pictures left out" in outcome.content
    assert "3 more pictures left out" in outcome.content


def test_a_header_value_that_would_be_echoed_by_the_transport_is_refused(api, owner, tracker):
    from garden.errors import ServiceError
    from garden.services.mcp import mcp_server_create

    for value in ("bell\x07", "mid\x01dle", ""):
        response = add(api, tracker, headers={"X-Key": value})
        assert response.status_code == 400, value
        assert response.json()["code"] == "INVALID_HEADERS"
    for value in (" padded", "trailing\t"):  # the API trims these; the service refuses them
        with pytest.raises(ServiceError) as refused:
            mcp_server_create(owner=owner, name="t", url=tracker.url, headers={"X-Key": value})
        assert refused.value.code == "INVALID_HEADERS"
    assert not McpServer.objects.exists()
    assert tracker.seen_headers == []


def test_a_steps_tools_are_found_with_one_read_of_the_owners_servers(owner, clerk):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from garden.tools import get_tools

    names = [*clerk.enabled_tools, "file.read", "mcp.tracker.nothing", "mcp.gone.lookup"]
    with CaptureQueriesContext(connection) as queries:
        found = get_tools(names, owner_id=owner.pk)
    assert sorted(found) == sorted([*clerk.enabled_tools, "file.read"])
    assert len([q for q in queries if "garden_mcpserver" in q["sql"]]) == 1
