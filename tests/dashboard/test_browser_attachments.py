"""Attachments in a browser, against daphne: files chosen with the composer's Attach button
(keyboard reachable, each removable), sent as a multipart form, shown in the room as a
thumbnail and a chip that open the file, and listed on the Canvas."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from garden.models import Artifact, AttachmentData
from tests.dashboard.conftest import assert_controls_labelled, open_room, tab_until
from tests.dashboard.helpers import household
from tests.groups.helpers import CSV_BYTES, png_bytes

pytestmark = [pytest.mark.browser, pytest.mark.timeout(30)]

PNG = png_bytes(8, 6)


def file(name: str, data: bytes, mime: str) -> dict:
    return {"name": name, "mimeType": mime, "buffer": data}


def test_a_picture_and_a_csv_attached_from_the_composer_reach_the_room_and_the_canvas(
    open_page, owner
):
    group = household(owner)
    page = open_room(open_page, owner, group)
    tab_until(page, "#composer-files")  # the file input itself is in the tab order
    expect(page.get_by_label("Attach")).to_be_focused()

    chooser = page.locator("#composer-files")
    chooser.set_input_files(
        [file("chart.png", PNG, "image/png"), file("rent.csv", CSV_BYTES, "text/csv")]
    )
    chosen = page.get_by_role("list", name="Files to send")
    expect(chosen.get_by_role("listitem")).to_have_count(2)
    # A file removed before sending is not sent; it can be chosen again.
    chosen.get_by_role("button", name="Remove rent.csv").click()
    expect(chosen.get_by_role("listitem")).to_have_count(1)
    chooser.set_input_files([file("rent.csv", CSV_BYTES, "text/csv")])
    expect(chosen).to_contain_text("chart.png")
    expect(chosen).to_contain_text("rent.csv")
    assert_controls_labelled(page)

    page.get_by_label("Message to the group").fill("What do these show?")
    page.get_by_role("button", name="Send").click()

    turn = page.locator("#transcript .turn--owner", has_text="What do these show?")
    thumbnail = turn.get_by_role("img", name="chart.png")
    expect(thumbnail).to_be_visible()
    page.wait_for_function(
        "() => [...document.querySelectorAll('#transcript img')].some(i => i.naturalWidth === 8)"
    )
    picture = Artifact.objects.get(title="chart.png")
    sheet = Artifact.objects.get(title="rent.csv")
    expect(turn.get_by_role("link", name="chart.png")).to_have_attribute(
        "href", f"/dashboard/artifacts/{picture.pk}/file"
    )
    chip = turn.get_by_role("link", name="rent.csv")
    expect(chip).to_have_attribute("href", f"/dashboard/artifacts/{sheet.pk}/file")
    expect(chosen).to_be_hidden()  # sent: the composer is empty again
    assert bytes(AttachmentData.objects.get(artifact=picture).data) == PNG

    canvas = page.get_by_role("complementary", name="Canvas")
    item = canvas.get_by_role("button", name="chart.png image · attached by you")
    expect(item).to_be_visible()
    item.click()
    expect(page.locator("#canvas-view-file").get_by_role("img", name="chart.png")).to_be_visible()
    canvas.get_by_role("button", name="rent.csv document · attached by you").click()
    expect(page.locator("#canvas-view-content")).to_contain_text("January,1400")
    expect(page.locator("#canvas-view-file").get_by_role("link")).to_have_text("Download rent.csv")


def test_a_file_the_site_refuses_is_named_at_the_composer(open_page, owner):
    group = household(owner)
    page = open_room(open_page, owner, group)
    page.locator("#composer-files").set_input_files(
        [file("tool.exe", b"MZ\x90\x00" + b"\x00" * 40, "image/png")]
    )
    page.get_by_role("button", name="Send").click()
    expect(page.locator('[data-error-for="files"]')).to_contain_text("tool.exe")
    expect(page.locator('[data-error-for="files"]')).to_contain_text("cannot be attached")
    assert Artifact.objects.count() == 0
    # Still chosen: removing it leaves an empty composer that sends nothing.
    page.get_by_role("button", name="Remove tool.exe").click()
    expect(page.get_by_role("list", name="Files to send")).to_be_hidden()
