"""Charts and browsing on the Canvas, in Chromium under the dashboard's real Content Security
Policy: a chart made with chart.create is drawn by the vendored Chart.js on a <canvas> that
names what it shows, its numbers in a table beside it; a page an agent fetched opens as a
visit — its URL a link, its status, its excerpt as text, never markup. Both at a desktop's
width and a phone's, in a group's room and an agent's own, with axe finding nothing serious."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import expect

from garden.models import Agent, Artifact
from garden.models.memory import PageVisit
from garden.services.conversations import agent_conversation_open
from garden.tools import ToolContext, run_tool
from tests.dashboard.conftest import assert_accessible, assert_controls_labelled, open_room
from tests.dashboard.helpers import household
from tests.support.tools import in_group

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}

CHART = {
    "title": "Spending by month",
    "type": "bar",
    "labels": ["Jan", "Feb", "Mar"],
    "series": [
        {"name": "Rent", "values": [800, 800, 820]},
        {"name": "Food", "values": [310, 290, 305]},
    ],
    "unit": "EUR",
}

# Every violation of the policy the page sees, from its first script on.
WATCH_CSP = """window.__violations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));"""

# Whether the open chart was drawn: a Chart.js chart on the canvas, and ink on it.
DRAWN = """() => {
  const canvas = document.querySelector("#canvas-view-chart canvas");
  if (!canvas || !window.Chart.getChart(canvas) || !canvas.width || !canvas.height) return 0;
  const { data } = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
  let inked = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i] > 0) inked += 1;
  return inked;
}"""


def ledger_of(owner) -> Agent:
    return Agent.objects.get(owner=owner, handle="ledger")


def watched(page):
    """The page reloaded with the policy's violations recorded from its first script."""
    page.context.add_init_script(WATCH_CSP)
    page.reload()
    expect(page.locator("#live")).to_have_text("Live")
    return page


def assert_no_violation(page) -> None:
    assert page.evaluate("window.__violations") == []


def assert_chart_shown(page) -> None:
    view = page.locator("#canvas-view")
    drawing = view.locator("#canvas-view-chart canvas")
    expect(drawing).to_have_attribute("role", "img")
    expect(drawing).to_have_attribute(
        "aria-label",
        re.compile(r"^Bar chart: Spending by month\. 2 series Rent, Food, 3 points \(Jan to Mar\)"),
    )
    page.wait_for_function(f"({DRAWN})() > 500")
    table = view.get_by_role("table", name="Spending by month (EUR)")
    expect(table.locator("thead th")).to_have_text(["Label", "Rent", "Food"])
    expect(table.locator("tbody tr").nth(2).locator("th, td")).to_have_text(["Mar", "820", "305"])
    expect(view.get_by_role("region", name="The numbers of Spending by month")).to_be_visible()
    # The stored spec is drawn, not printed.
    expect(view.locator("#canvas-view-content")).to_be_hidden()
    box = drawing.bounding_box()
    assert box and box["width"] > 100 and box["x"] + box["width"] <= page.viewport_size["width"]


def test_a_chart_is_drawn_with_its_numbers_at_desktop_and_phone_width(open_page, owner):
    group = household(owner)
    ledger = ledger_of(owner)
    made = run_tool(in_group(group, ledger), "chart.create", CHART)
    assert not made.is_error, made.content
    page = watched(open_room(open_page, owner, group))
    page.set_viewport_size(DESKTOP)
    item = page.get_by_role("complementary", name="Canvas").get_by_role(
        "button", name=re.compile("Spending by month")
    )
    expect(item).to_have_accessible_name("Spending by month chart · by Ledger")
    expect(item.locator(".face")).to_have_text("L")
    item.click()
    expect(page.locator("#canvas-view-meta")).to_have_text("chart · by Ledger")
    assert_chart_shown(page)
    expect(page.locator("#canvas-view-chart .canvas-chart-data")).to_be_focused()
    assert_controls_labelled(page)
    assert_accessible(page)
    page.set_viewport_size(PHONE)
    page.reload()
    expect(page.locator("#live")).to_have_text("Live")
    # On a phone the Canvas opens when the person opens it: a sheet over the room.
    page.get_by_role("button", name="Canvas", exact=True).click()
    page.get_by_role("button", name=re.compile("Spending by month")).click()
    assert_chart_shown(page)
    assert_accessible(page)
    # Closed, the chart goes with it; opened again, it is drawn again.
    page.get_by_role("button", name="Close the artifact").click()
    assert page.evaluate("document.querySelectorAll('#canvas-view-chart canvas').length") == 0
    page.get_by_role("button", name=re.compile("Spending by month")).click()
    page.wait_for_function(f"({DRAWN})() > 500")
    assert_no_violation(page)


def test_a_text_chart_written_as_a_file_still_reads_as_its_text(open_page, owner):
    group = household(owner)
    run_tool(
        in_group(group, ledger_of(owner)),
        "file.write",
        {"title": "Sketch", "content": "Jan ###\nFeb ##", "kind": "chart"},
    )
    page = open_room(open_page, owner, group)
    page.get_by_role("button", name=re.compile("Sketch")).click()
    expect(page.locator("#canvas-view-content")).to_have_text("Jan ###\nFeb ##")
    expect(page.locator("#canvas-view-chart")).to_be_hidden()


def test_a_chart_opens_in_an_agents_own_room(open_page, owner):
    household(owner)
    ledger = ledger_of(owner)
    conversation = agent_conversation_open(owner=owner, agent=ledger)
    ctx = ToolContext(owner_id=owner.pk, agent_id=ledger.pk, conversation_id=conversation.pk)
    assert not run_tool(ctx, "chart.create", CHART).is_error
    page = open_page(owner, f"/dashboard/agents/{ledger.pk}/room/")
    expect(page.locator("#live")).to_have_text("Live")
    page = watched(page)
    page.get_by_role("button", name=re.compile("Spending by month")).click()
    assert_chart_shown(page)
    assert_no_violation(page)


PAGE = b"""<!doctype html><html><head><title>Savings rates</title>
<script>window.__fetched_page_ran = true</script></head>
<body><h1>Rates today</h1><p>Fixed deposits pay 3.1%.</p>
<p>&lt;script&gt;window.__xss = 1&lt;/script&gt; &lt;img src=x onerror="window.__xss = 2"&gt;</p>
</body></html>"""


@pytest.fixture
def site(settings) -> Iterator[str]:
    """A page on 127.0.0.1 that http.fetch may reach."""
    settings.GARDEN_EGRESS_ALLOW = ["127.0.0.1/32"]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/rates?month=3"
    httpd.shutdown()
    httpd.server_close()


def test_a_fetched_page_opens_as_a_visit_and_its_markup_stays_text(open_page, owner, site):
    group = household(owner)
    ledger = ledger_of(owner)
    ctx = in_group(group, ledger)
    assert not run_tool(ctx, "http.fetch", {"url": site}).is_error
    run_tool(ctx, "http.fetch", {"url": site})  # the same page twice: two visits
    page = watched(open_room(open_page, owner, group))
    page.set_viewport_size(DESKTOP)
    browsing = page.get_by_role("complementary", name="Canvas").get_by_role(
        "region", name="Browsing"
    )
    entries = browsing.get_by_role("button")
    expect(entries).to_have_count(2)
    expect(entries.first).to_have_accessible_name("Savings rates HTTP 200 · by Ledger")
    expect(entries.first.locator(".face")).to_have_text("L")
    entries.first.click()
    view = page.locator("#canvas-view")
    expect(view.locator("#canvas-view-title")).to_have_text("Savings rates")
    expect(view.locator("#canvas-view-meta")).to_have_text("visited page · HTTP 200 · by Ledger")
    link = view.get_by_role("link", name=site)
    expect(link).to_have_attribute("href", site)
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    expect(link).to_have_attribute("target", "_blank")
    expect(view.locator(".canvas-visit-status")).to_have_text("HTTP 200")
    expect(view.locator("time")).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT"))
    expect(view.locator("#canvas-view-content")).to_have_text(
        "Rates today Fixed deposits pay 3.1%. <script>window.__xss = 1</script> "
        '<img src=x onerror="window.__xss = 2">'
    )
    # Shown as text: no element of the page came along, and nothing of it ran.
    assert view.locator("script, img").count() == 0
    assert page.evaluate("[window.__xss, window.__fetched_page_ran]") == [None, None]
    assert_controls_labelled(page)
    assert_accessible(page)
    page.set_viewport_size(PHONE)
    expect(link).to_be_visible()
    assert_accessible(page)
    assert_no_violation(page)


@pytest.mark.django_db
def test_the_documents_page_lists_a_chart_and_no_visit(signed_in, owner, site):
    group = household(owner)
    ctx = in_group(group, ledger_of(owner))
    run_tool(ctx, "chart.create", CHART)
    run_tool(ctx, "http.fetch", {"url": site})
    assert PageVisit.objects.filter(owner=owner).count() == 1
    html = signed_in.get("/dashboard/documents/").content.decode()
    assert "Spending by month <span" in html and "(chart)" in html
    assert "Savings rates" not in html
    assert list(Artifact.objects.filter(owner=owner).values_list("kind", flat=True)) == ["chart"]
