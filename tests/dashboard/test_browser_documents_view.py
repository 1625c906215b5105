"""Documents as people read them: a Markdown document renders (the room's sanitiser), opens in
full in a wide sheet (the whole of it, past what the page carries) and downloads, from the
Canvas and from the Documents page; on a phone the open Canvas is a sheet over the room, which
stays where it is, and an open chart's close button stays on screen however far the sheet scrolls."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from garden.models import Agent, Artifact
from garden.tools import run_tool
from tests.dashboard.conftest import assert_accessible, open_room
from tests.dashboard.helpers import artifact, household, say
from tests.dashboard.test_browser_canvas_charts import CHART
from tests.support.tools import in_group

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}

# Longer than the 20,000 characters the page carries of a document: the end is read in full.
PLAN = (
    "# Savings plan\n\nPut **800** aside each month, <script>window.__ran = 1</script>.\n\n"
    + "".join(f"- Month {i}: keep to the budget\n" for i in range(900))
    + "\n## The last line\n\nReview it in **December**.\n"
)


def a_plan(owner, group) -> Artifact:
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    doc = artifact(group, agent=ledger, title="Savings plan", content=PLAN)
    Artifact.objects.filter(pk=doc.pk).update(mime_type="text/markdown")
    return doc


def assert_full_view(page, doc) -> None:
    sheet = page.get_by_role("dialog", name="Savings plan")
    expect(sheet).to_be_visible()
    body = sheet.locator("#document-dialog-doc")
    expect(body.get_by_role("heading", name="Savings plan", level=1)).to_be_visible()
    expect(body.locator("strong").first).to_have_text("800")
    # The whole document, read from its download: its end too, rendered.
    expect(body.get_by_role("heading", name="The last line")).to_be_attached()
    expect(body.locator("strong").last).to_have_text("December")
    assert body.locator("script").count() == 0
    assert page.evaluate("window.__ran") is None
    download = sheet.get_by_role("link", name="Download Savings plan")
    expect(download).to_have_attribute("href", f"/dashboard/artifacts/{doc.pk}/download")
    with page.expect_download() as saving:
        download.click()
    assert saving.value.suggested_filename == "Savings plan.md"
    box = sheet.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= page.viewport_size["width"]
    assert_accessible(page)
    sheet.get_by_role("button", name="Close").click()
    expect(sheet).to_be_hidden()


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1366", "390"])
def test_a_markdown_document_on_the_canvas_renders_opens_in_full_and_downloads(
    open_page, owner, size
):
    group = household(owner)
    doc = a_plan(owner, group)
    page = open_room(open_page, owner, group)
    page.set_viewport_size(size)
    if size == PHONE:  # opened on a phone, the Canvas waits to be opened
        page.reload()
        expect(page.locator("#live")).to_have_text("Live")
        page.get_by_role("button", name="Canvas", exact=True).click()
    page.get_by_role("button", name=re.compile("^Savings plan")).click()
    view = page.locator("#canvas-view-doc")
    expect(view.get_by_role("heading", name="Savings plan", level=1)).to_be_visible()
    expect(page.locator("#canvas-view-content")).to_be_hidden()  # not its raw source
    expect(page.get_by_role("link", name="Download Savings plan")).to_have_attribute(
        "href", f"/dashboard/artifacts/{doc.pk}/download"
    )
    full = page.get_by_role("button", name="Open the document in full")
    full.click()
    assert_full_view(page, doc)
    expect(full).to_be_focused()  # back where the sheet was opened from


def test_on_a_phone_the_open_canvas_leaves_the_room_in_place_and_a_charts_close_stays_on_screen(
    open_page, owner
):
    group = household(owner)
    for i in range(12):
        say(group, text=f"Turn {i}: a line of the discussion")
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    assert not run_tool(in_group(group, ledger), "chart.create", CHART).is_error
    a_plan(owner, group)
    page = open_room(open_page, owner, group)
    page.set_viewport_size(PHONE)
    page.reload()
    expect(page.locator("#live")).to_have_text("Live")
    toggle = page.get_by_role("button", name="Canvas", exact=True)
    expect(toggle).to_have_attribute("aria-expanded", "false")  # it waits to be opened
    header = page.locator("#group-name").bounding_box()
    composer = page.get_by_label("Message to the group").bounding_box()

    toggle.click()
    page.get_by_role("button", name=re.compile("Spending by month")).click()
    expect(page.locator("#canvas-view-chart canvas")).to_be_visible()
    # The room did not move: the Canvas lies over it.
    assert page.locator("#group-name").bounding_box()["y"] <= header["y"]
    assert page.get_by_label("Message to the group").bounding_box()["y"] == composer["y"]
    close = page.get_by_role("button", name="Close the artifact")
    page.locator("#canvas").evaluate("canvas => { canvas.scrollTop = canvas.scrollHeight; }")
    expect(close).to_be_in_viewport()
    box = close.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    assert 0 <= box["y"] and box["y"] + box["height"] <= PHONE["height"]
    assert_accessible(page)
    close.click()
    expect(page.locator("#canvas-view")).to_be_hidden()
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    assert page.get_by_label("Message to the group").bounding_box()["y"] == composer["y"]


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1366", "390"])
def test_the_documents_page_views_and_downloads_a_document(open_page, owner, size):
    group = household(owner)
    doc = a_plan(owner, group)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    run_tool(in_group(group, ledger), "chart.create", CHART)
    page = open_page(owner, "/dashboard/documents/")
    page.set_viewport_size(size)
    row = page.locator(f"#document-{doc.pk}")
    chart = page.locator(".document", has_text="Spending by month")
    expect(chart.get_by_role("button", name="View Spending by month")).to_be_hidden()
    expect(chart.get_by_role("link", name="Download Spending by month")).to_be_visible()
    assert_accessible(page)
    view = row.get_by_role("button", name="View Savings plan")
    view.click()
    assert_full_view(page, doc)
    expect(view).to_be_focused()
    with page.expect_download() as saving:
        row.get_by_role("link", name="Download Savings plan").click()
    assert saving.value.suggested_filename == "Savings plan.md"
