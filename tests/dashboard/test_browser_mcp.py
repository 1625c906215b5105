"""An MCP server's tools in a browser, against daphne, a real worker and a real MCP server
(tests/mcp_server.py): added on the Tools page (its tools listed with their hints), one given
to an agent on its page with its approval policy, called in the agent's room where the card
names the tool and the server and is approved with changed arguments — the server receives
exactly the changed call — and removed again; a refused server is named and nothing is kept;
a Test of a server that stopped names why and keeps the tools listed before."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from garden.models import Agent, McpServer
from groups.models import Approval
from tests.dashboard.conftest import assert_accessible, assert_controls_labelled
from tests.dashboard.helpers import teammate
from tests.mcp_server import McpTestServer, mcp_server, serving

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

PHONE = {"width": 390, "height": 844}
DONE = "Done: the record is gone."
CLERK_RULES = [
    {"after_tool_error": True, "reply": "It was not deleted."},
    {"after_tool_result": True, "reply": DONE},
    {
        "when": "delete",
        "reply": {
            "text": "Deleting it.",
            "tool_calls": [{"name": "mcp.tracker.delete_record", "arguments": {"record_id": 7}}],
        },
    },
]


@pytest.fixture
def loopback_mcp(settings) -> None:
    # The live server runs in this process, so the operator's allowance reaches it.
    settings.GARDEN_EGRESS_ALLOW_MCP = ["127.0.0.1"]


@pytest.fixture
def tracker(loopback_mcp) -> Iterator[McpTestServer]:
    with mcp_server() as server:
        yield server


def assert_fits_a_phone(page) -> None:
    page.set_viewport_size(PHONE)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"the page is {width} px wide"


def add_server(page, name: str, url: str, headers: str = "") -> None:
    form = page.locator("#mcp-form")
    form.get_by_label("Name", exact=True).fill(name)
    form.get_by_label("URL", exact=True).fill(url)
    form.get_by_label("Headers (optional)").fill(headers)
    form.get_by_role("button", name="Add server").click()


def test_a_servers_tool_is_added_given_to_an_agent_and_approved_with_changes(
    open_page, owner, tracker, live_worker
):
    clerk = teammate(owner, "clerk", "Clerk", rules=CLERK_RULES)

    # The Tools page: added, its tools listed with their hints.
    page = open_page(owner, "/dashboard/")
    page.get_by_role("navigation", name="Dashboard").get_by_role("link", name="Tools").click()
    expect(page.get_by_role("heading", name="Your MCP servers")).to_be_visible()
    add_server(page, "tracker", tracker.url, headers="X-Team: blue-team-secret")
    tools = page.get_by_role("list", name="Tools of tracker")
    expect(tools.locator(".mcp-tool", has_text="delete_record").locator(".tag")).to_have_text(
        "destructive"
    )
    expect(tools.locator(".mcp-tool", has_text="lookup").locator(".tag")).to_have_text("read-only")
    expect(tools).to_contain_text("Delete a record for good.")
    assert McpServer.objects.get(owner=owner).name == "tracker"
    # The header reached the server; the page names it and never shows its value.
    assert tracker.seen_headers[-1]["x-team"] == "blue-team-secret"
    expect(page.locator(".mcp-server .account-facts")).to_contain_text("X-Team")
    assert "blue-team-secret" not in page.content()
    assert_accessible(page)
    assert_controls_labelled(page)
    # Test lists them again.
    page.get_by_role("button", name="Test tracker").click()
    expect(page.locator(".mcp-server .test-result")).to_have_text(
        re.compile(r"^Works: it lists \d+ tools\.$")
    )
    expect(tools.locator(".mcp-tool", has_text="delete_record")).to_be_visible()
    assert_fits_a_phone(page)
    assert tracker.calls == []  # listing calls no tool

    # The agent's page: the tool given, its approval chosen.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"/dashboard/agents/{clerk.pk}/")
    server = page.get_by_role("group", name=re.compile("^tracker"))
    expect(server).to_contain_text("By its annotations — may destroy things: asks first")
    expect(server).to_contain_text("By its annotations — reads only: runs without approval")
    server.get_by_label("delete_record on tracker", exact=True).check()
    server.get_by_label("Approval of delete_record on tracker").select_option("always")
    assert_accessible(page)
    page.get_by_role("button", name="Save changes").click()
    expect(page.locator("#agent-saved")).to_contain_text("Saved.")
    clerk.refresh_from_db()
    assert "mcp.tracker.delete_record" in clerk.enabled_tools
    assert clerk.tool_approvals == {"mcp.tracker.delete_record": "always"}

    # Its room: the card names the tool and its server; approved with record 8 instead of 7.
    page.goto(f"/dashboard/agents/{clerk.pk}/room/")
    expect(page.locator("#live")).to_have_text("Live")
    page.get_by_label("Message to Clerk").fill("Please delete record 7.")
    page.get_by_role("button", name="Send").click()
    card = page.locator(".approval")
    expect(card).to_contain_text("Clerk wants to run delete_record on the MCP server tracker")
    card.get_by_role("button", name=re.compile("^Edit before approving")).click()
    sheet = page.get_by_role("dialog", name="Approve with changes")
    sheet.get_by_label("record_id (JSON)").fill("8")
    sheet.get_by_role("button", name="Approve with these").click()
    expect(sheet).to_be_hidden()
    expect(page.locator("#transcript")).to_contain_text(DONE)
    assert tracker.calls == [("delete_record", {"record_id": 8})]
    approval = Approval.objects.get(agent=clerk)
    assert (approval.status, approval.approved_arguments) == ("approved", {"record_id": 8})

    # Removed: its tools leave the agent.
    page.goto("/dashboard/tools/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Remove… tracker").click()
    expect(page.locator(".mcp-list").first).to_have_text("No MCP servers yet.")
    assert not McpServer.objects.exists()
    assert "mcp.tracker.delete_record" not in Agent.objects.get(pk=clerk.pk).enabled_tools


async def _html(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]}
    )
    await send({"type": "http.response.body", "body": b"<html>a blog</html>"})


@pytest.mark.parametrize("refusal", ["MCP_NOT_MCP", "EGRESS_REFUSED"])
def test_a_refused_server_is_named_on_the_page_and_nothing_is_kept(
    open_page, owner, loopback_mcp, refusal
):
    page = open_page(owner, "/dashboard/tools/")
    if refusal == "MCP_NOT_MCP":
        with serving(_html) as url:  # a web page, not an MCP server
            add_server(page, "blog", url)
            expect(page.locator("#mcp-url-error")).to_contain_text(f"{refusal}: blog:")
    else:
        add_server(page, "inside", "http://10.0.0.7/mcp")  # a private address
        expect(page.locator("#mcp-url-error")).to_contain_text(f"{refusal}:")
    expect(page.locator("#mcp-adding")).to_have_text("Not added: see the highlighted field.")
    expect(page.locator("#mcp-url")).to_have_attribute("aria-invalid", "true")
    assert not McpServer.objects.exists()
    assert_accessible(page)
    assert_fits_a_phone(page)
    page.reload()
    expect(page.locator(".mcp-list").first).to_have_text("No MCP servers yet.")


def test_test_names_why_a_server_no_longer_answers_and_keeps_its_tools(
    open_page, owner, loopback_mcp
):
    with mcp_server() as tracker:
        page = open_page(owner, "/dashboard/tools/")
        add_server(page, "tracker", tracker.url)
        tools = page.get_by_role("list", name="Tools of tracker")
        expect(tools).to_contain_text("delete_record")
    # The server has stopped.
    page.get_by_role("button", name="Test tracker").click()
    expect(page.locator(".mcp-server .test-result")).to_contain_text("MCP_UNREACHABLE: tracker:")
    expect(tools).to_contain_text("delete_record")
    assert {t["name"] for t in McpServer.objects.get(owner=owner).tools} >= {
        "lookup",
        "delete_record",
    }
