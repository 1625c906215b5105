"""The Tools page without a browser, against a real MCP server (tests/mcp_server.py): it lists
the owner's servers with their tools (never a header's value) and the site's read-only; the
writes its script makes (Test, Remove, Add) refuse another owner's server with a 404 and store
nothing on a refusal; an agent's page offers the MCP tools by server, each with its default
approval in the words ``needs_approval`` decides by."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache

from garden.models import Agent, McpServer
from garden.services.mcp import mcp_server_create
from garden.tools import needs_approval
from tests.conftest import CsrfClient
from tests.mcp_server import mcp_server

pytestmark = pytest.mark.django_db

TOKEN = "s3cret-bearer-value"
TEAM = "team-header-value"


@pytest.fixture
def tracker(settings):
    # The operator allows MCP servers on loopback, as for an internal one.
    settings.GARDEN_EGRESS_ALLOW_MCP = ["127.0.0.1"]
    with mcp_server() as server:
        yield server


def session(user) -> CsrfClient:
    """A browser session as the page's script has it: signed in, CSRF pair sent on writes."""
    from rest_framework.test import APIClient

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    return CsrfClient(client)


def test_the_page_lists_ones_own_servers_and_the_sites_and_never_a_header_value(
    settings, owner, stranger, tracker
):
    mcp_server_create(
        owner=owner,
        name="tracker",
        url=tracker.url,
        bearer_token=TOKEN,
        headers={"X-Team": TEAM},
    )
    mcp_server_create(owner=stranger, name="theirs", url=tracker.url)
    settings.GARDEN_MCP_SERVERS = {"site-wiki": {"url": tracker.url, "users": "*"}}
    cache.clear()
    html = session(owner).get("/dashboard/tools/").content.decode()
    assert 'id="mcp-form"' in html and 'href="/dashboard/tools/"' in html  # the nav's link
    mine = html[html.index('class="account mcp-server"') : html.index("Offered by this site")]
    assert "tracker" in mine and tracker.url in mine
    assert "Authorization, X-Team" in mine
    assert re.search(r"<code>delete_record</code>\s*<span class=\"tag tag--destructive\">", mine)
    assert re.search(r"<code>lookup</code>\s*<span class=\"tag tag--read-only\">", mine)
    assert "Delete a record for good." in mine and "js-test" in mine
    site = html[html.index("Offered by this site") :]
    assert "site-wiki" in site and "delete_record" in site
    assert "js-test" not in site and "js-delete" not in site  # read-only
    assert TOKEN not in html and TEAM not in html
    assert "theirs" not in html


def test_another_owner_can_neither_test_nor_remove_a_server(owner, stranger, tracker):
    server = mcp_server_create(owner=owner, name="tracker", url=tracker.url)
    connections = len(tracker.seen_headers)
    theirs = session(stranger)
    for response in (
        theirs.post(f"/api/mcp-servers/{server.pk}/refresh"),
        theirs.delete(f"/api/mcp-servers/{server.pk}"),
        theirs.get(f"/dashboard/tools/{server.pk}/list"),
    ):
        assert response.status_code == 404
    assert McpServer.objects.get(pk=server.pk).refreshed_at == server.refreshed_at
    assert len(tracker.seen_headers) == connections  # nothing was asked of the server
    page = theirs.get("/dashboard/tools/").content.decode()
    assert "No MCP servers yet." in page and tracker.url not in page

    # Its owner's Test lists the tools again, and the page's fragment shows them.
    mine = session(owner)
    assert mine.post(f"/api/mcp-servers/{server.pk}/refresh").status_code == 200
    fragment = mine.get(f"/dashboard/tools/{server.pk}/list").content.decode()
    assert "delete_record" in fragment and "<html" not in fragment
    assert mine.delete(f"/api/mcp-servers/{server.pk}").status_code == 204
    assert not McpServer.objects.exists()


@pytest.mark.parametrize(
    ("url", "code"),
    [("http://10.0.0.7/mcp", "EGRESS_REFUSED"), ("ftp://example.com/mcp", "INVALID_URL")],
)
def test_a_refused_add_stores_nothing(owner, url, code):
    mine = session(owner)
    response = mine.post("/api/mcp-servers", {"name": "inside", "url": url})
    assert response.status_code == 400
    assert response.json()["errors"][0] | {"message": ""} == {
        "field": "url",
        "code": code,
        "message": "",
    }
    assert not McpServer.objects.exists()
    assert "No MCP servers yet." in mine.get("/dashboard/tools/").content.decode()


def test_a_write_without_the_csrf_pair_is_refused(owner, tracker):
    response = session(owner).post(
        "/api/mcp-servers", {"name": "tracker", "url": tracker.url}, csrf=False
    )
    assert response.status_code == 403
    assert not McpServer.objects.exists()


def test_an_agents_page_offers_the_mcp_tools_by_server_with_their_default_in_words(owner, tracker):
    mcp_server_create(owner=owner, name="tracker", url=tracker.url)
    concierge = Agent.objects.get(owner=owner, handle="concierge")
    html = session(owner).get(f"/dashboard/agents/{concierge.pk}/").content.decode()
    assert "<legend>tracker" in html
    words = {
        "lookup": "reads only: runs without approval",
        "delete_record": "may destroy things: asks first",
        "slow": "may change things: asks first",
    }
    for tool, said in words.items():
        name = f"mcp.tracker.{tool}"
        row = html[html.index(f'value="{name}"') :]
        row = row[: row.index("</select>") + 200]
        assert f'data-tool="{name}"' in row
        assert f"By its annotations — {said}" in row
        assert '<option value="annotations" selected>By its annotations (default)</option>' in row
        # The words say what the runtime decides.
        asks = needs_approval(name=name, approval_tools=[], tool_approvals={}, owner_id=owner.pk)
        assert asks == said.endswith("asks first")
    assert 'value="mcp.tracker.broken"' in html  # usable, though it fails when called


def test_an_mcp_tool_its_server_no_longer_lists_stays_on_the_agents_page_to_be_taken_away(
    owner,
):
    concierge = Agent.objects.get(owner=owner, handle="concierge")
    Agent.objects.filter(pk=concierge.pk).update(enabled_tools=["mcp.gone.lookup"])
    html = session(owner).get(f"/dashboard/agents/{concierge.pk}/").content.decode()
    assert "No MCP servers yet." in html and "No longer listed" in html
    assert re.search(r'value="mcp\.gone\.lookup" checked', html)
