"""Agent Father offline, in a browser against daphne and a real worker: asked to make an agent,
it makes it through its platform tool after the owner's approval and says so only then; asked
anything else, it says exactly what it can do — at a desktop's width and a phone's."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from garden.models import Agent
from groups.models import Approval
from tests.dashboard.conftest import assert_accessible

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]

SIZES = [
    pytest.param({"width": 1366, "height": 900}, id="1366px"),
    pytest.param({"width": 390, "height": 844}, id="390px"),
]


def maker_room(open_page, owner, size):
    maker = Agent.objects.get(owner=owner, builtin="maker")
    page = open_page(owner, f"/dashboard/agents/{maker.pk}/room/")
    page.set_viewport_size(size)
    expect(page.locator("#live")).to_have_text("Live")
    return maker, page


def send(page, maker, text: str) -> None:
    page.get_by_label(f"Message to {maker.name}").fill(text)
    page.get_by_role("button", name="Send").click()


@pytest.mark.parametrize("size", SIZES)
def test_offline_agent_father_makes_the_agent_after_approval(open_page, owner, live_worker, size):
    maker, page = maker_room(open_page, owner, size)
    send(page, maker, "make me an agent called Tax Helper")
    card = page.locator(".approval")
    expect(card).to_contain_text("Tax Helper")
    assert not Agent.objects.filter(owner=owner, name="Tax Helper").exists()
    assert_accessible(page)
    card.get_by_role("button", name=re.compile("^Approve")).click()
    expect(
        page.locator(".turn--agent", has_text="Done: I made the agent Tax Helper (@tax-helper)")
    ).to_be_visible()
    assert Agent.objects.filter(owner=owner, name="Tax Helper", handle="tax-helper").exists()
    assert Approval.objects.get(agent=maker).status == "approved"


@pytest.mark.parametrize("size", SIZES)
def test_offline_agent_father_says_what_it_can_do_and_does_nothing_else(
    open_page, owner, live_worker, size
):
    maker, page = maker_room(open_page, owner, size)
    agents = Agent.objects.filter(owner=owner).count()
    send(page, maker, "Please set up my taxes for me")
    answer = page.locator(".turn--agent", has_text="Without a model I understand")
    expect(answer).to_be_visible()
    expect(answer).to_contain_text("make me an agent called")
    expect(page.locator(".approval")).to_have_count(0)
    assert Agent.objects.filter(owner=owner).count() == agents
    assert_accessible(page)
