"""What a daily user reads in the room and on an agent's page: the budget in words (the raw
counters a click away), a failed request's outcome in its sentence with Retry where asking again
may help (a model server down) and none where it cannot (an address the site refuses), and the
saved message of an agent's settings fitting the agent."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from garden.models import Agent, ModelAccount
from groups.models import GroupRequest
from tests.dashboard.conftest import assert_accessible, open_room, send
from tests.dashboard.helpers import SPENDING, household, teammate

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

WIDTHS = [1366, 390]


def sized(page, width):
    page.set_viewport_size({"width": width, "height": 844})
    return page


def point_at(owner, agent, base_url) -> None:
    # Saved as a row: an address the site refuses is refused where accounts are made.
    agent.model_account = ModelAccount.objects.create(
        owner=owner,
        name=f"{agent.handle}-http",
        provider="openai",
        model="m",
        base_url=base_url,
        timeout_seconds=5,
    )
    agent.save(update_fields=["model_account"])


@pytest.mark.parametrize("width", WIDTHS)
def test_the_budget_reads_in_words_with_the_counters_a_click_away(
    open_page, owner, live_worker, width
):
    group = household(owner)
    page = sized(open_room(open_page, owner, group), width)
    send(page, SPENDING)
    budget = page.locator("#budget")
    expect(budget.locator("strong")).to_have_text("Completed")
    steps = budget.locator(".budget-steps")
    expect(steps.locator("summary")).to_have_text("4 of 11 steps used · conclusion written")
    figures = steps.locator(".budget-figures")
    expect(figures).to_be_hidden()
    steps.locator("summary").click()
    expect(figures).to_have_text("Model calls: working 4/11 · synthesis 0/1")
    assert_accessible(page)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_request_the_model_server_could_not_answer_says_why_and_retries(
    open_page, owner, live_worker, loopback_providers, settings, width
):
    from tests.garden.providers.httpserver import unused_port

    settings.GARDEN_PROVIDER_RETRY_ATTEMPTS = 1
    group = household(owner)
    concierge = Agent.objects.get(owner=owner, handle="concierge")
    working = concierge.model_account
    point_at(owner, concierge, f"http://127.0.0.1:{unused_port()}/v1")
    page = sized(open_room(open_page, owner, group), width)
    send(page, SPENDING)

    budget = page.locator("#budget")
    expect(budget.locator("strong")).to_have_text("Ended early", timeout=30_000)
    outcome = budget.locator(".budget-outcome")
    expect(outcome).to_contain_text(
        "PROVIDER_UNREACHABLE: Nothing is answering at the base URL: is the model server running"
    )
    retry = outcome.get_by_role("button", name="Retry: send your message again")
    expect(retry).to_be_visible()
    assert_accessible(page)

    # The server is back (here: Concierge on its script again): Retry sends the message again.
    concierge.model_account = working
    concierge.save(update_fields=["model_account"])
    retry.click()
    expect(page.get_by_label("Message to the group")).to_be_focused()
    expect(budget.locator("strong")).to_have_text("Completed", timeout=30_000)
    expect(page.locator("#transcript .turn--owner", has_text=SPENDING)).to_have_count(2)
    assert list(
        GroupRequest.objects.filter(group=group).order_by("id").values_list("state", flat=True)
    ) == ["failed", "completed"]


def test_an_address_the_site_refuses_is_said_in_words_and_offers_no_retry(
    open_page, owner, live_worker, settings
):
    settings.GARDEN_PROVIDER_RETRY_ATTEMPTS = 1
    group = household(owner)
    concierge = Agent.objects.get(owner=owner, handle="concierge")
    point_at(owner, concierge, "http://127.0.0.1:9/v1")
    page = open_room(open_page, owner, group)
    send(page, SPENDING)
    outcome = page.locator("#budget .budget-outcome")
    expect(outcome).to_contain_text(
        "EGRESS_REFUSED: The base URL is an address this site does not connect to", timeout=30_000
    )
    expect(outcome.get_by_role("button")).to_have_count(0)
    assert_accessible(page)


@pytest.mark.parametrize(
    ("in_a_group", "said"),
    [
        (False, "Saved. Its next reply uses it."),
        (True, "Saved. Its next reply uses it, in its own room and in its groups."),
    ],
)
def test_an_agents_saved_message_fits_the_agent(open_page, owner, in_a_group, said):
    if in_a_group:
        household(owner)
        agent = Agent.objects.get(owner=owner, handle="ledger")
    else:
        agent = teammate(owner, "tutor", "Tutor")
    page = open_page(owner, f"/dashboard/agents/{agent.pk}/")
    page.get_by_label("Instructions").fill("Answer briefly.")
    page.get_by_role("button", name="Save changes").click()
    expect(page.locator("#agent-saved")).to_have_text(said)
    assert_accessible(page)
