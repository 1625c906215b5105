"""The operator-messages admin, live: a tend run that finishes while the page is open adds its
line ("Tend finished: note written at …" or "… no note") without a reload."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from operator_messages import emit_tend_survey
from operator_messages.driver import run_goal
from tests.dashboard.conftest import assert_accessible
from tests.operator_messages.helpers import start

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]

ADMIN = "/admin/operator_messages/operatormessagerun/"


def a_tend_run(note: str | None) -> dict:
    goal, _, _ = start("tend")

    def work(active):
        if note is not None:
            assert emit_tend_survey(note).ok

    return run_goal(goal, "gardener", work).tend_finished


@pytest.mark.parametrize("width", [1366, 390])
def test_a_tend_run_finishing_shows_on_the_open_admin_page(
    open_page, django_user_model, runtime, width
):
    staff = django_user_model.objects.create_superuser(username="operator", password="pw-op-123")
    page = open_page(staff, ADMIN)
    page.set_viewport_size({"width": width, "height": 844})
    expect(page.locator("#tend-live-state")).to_contain_text("Live")

    with_note = a_tend_run("One approval has waited two hours.")
    lines = page.locator("#tend-finished li")
    expect(lines).to_have_count(1)
    expect(lines.first).to_contain_text(
        f"Tend finished: note written at {with_note['operator_note_path']}"
    )
    expect(lines.first.get_by_role("link", name=f"run {with_note['run_id']}")).to_be_visible()

    without = a_tend_run(None)
    expect(lines).to_have_count(2)
    expect(lines.first).to_contain_text(re.compile(r"Tend finished: no note \(run "))
    expect(lines.first).to_contain_text(without["run_id"])
    assert_accessible(page)

    # The run's link finds it in the list below (only runs with records are listed).
    lines.last.get_by_role("link").click()
    expect(page.locator("#result_list")).to_contain_text(with_note["run_id"])
