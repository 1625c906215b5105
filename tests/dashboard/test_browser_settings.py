"""Setting up a team on real models without a shell: an agent's settings page, a group's
coordinator, the model accounts page and its Test against a real local HTTP server, and axe
on each page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from garden.models import Agent, ModelAccount
from groups.models import Group
from tests.dashboard.conftest import assert_accessible, assert_controls_labelled, tab_until
from tests.dashboard.helpers import household, teammate
from tests.garden.providers.httpserver import Respond, ScriptedServer
from tests.support.providers import openai_reply
from tests.telegram.conftest import bot_api  # noqa: F401  (a fixture: the local Bot API)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]

SECRET = "sk-test-secret-never-shown"


def account_row(page, name: str):
    return page.locator(".account").filter(has=page.locator("h3", has_text=re.compile(f"^{name}$")))


@pytest.fixture
def model_server(loopback_providers):
    server = ScriptedServer()
    yield server
    server.close()


def test_edit_an_agents_instructions_model_account_and_tools(open_page, owner, model_server):
    local = ModelAccount.objects.create(
        owner=owner,
        name="Local llama",
        provider="openai",
        model="llama3.1",
        base_url=f"{model_server.url}/v1",
    )
    teammate(owner, "ledger", "Ledger")
    concierge = Agent.objects.get(owner=owner, handle="concierge")
    page = open_page(owner, f"/dashboard/agents/{concierge.pk}/")
    assert_controls_labelled(page)
    assert_accessible(page)

    page.get_by_label("Instructions").fill("Coordinate the household's money questions.")
    page.get_by_label("Model account").select_option(
        label="Local llama — OpenAI-compatible · llama3.1"
    )
    page.get_by_label("Name").fill("Head Concierge")
    # Asking approval for a tool gives the tool too; the page says so before saving.
    page.locator(".tool-row", has_text="file.write").get_by_role(
        "checkbox", name="needs your approval"
    ).check()
    page.get_by_role("checkbox", name="Ledger @ledger").check()
    tab_until(page, "#agent-settings [type=submit]")
    page.keyboard.press("Enter")
    expect(page.locator("#agent-saved")).to_have_text(re.compile("^Saved"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("Head Concierge")

    concierge.refresh_from_db()
    assert concierge.instructions == "Coordinate the household's money questions."
    assert concierge.model_account_id == local.pk
    assert concierge.name == "Head Concierge"
    # Concierge reads the group's files by default; file.write came with its approval.
    assert concierge.enabled_tools == ["file.list", "file.read", "file.write"]
    assert concierge.approval_tools == ["file.write"]
    assert list(concierge.delegation_allowlist.values_list("handle", flat=True)) == ["ledger"]

    # A refusal is shown by its field and nothing changes.
    page.get_by_label("Name").fill("")
    page.get_by_role("button", name="Save changes").click()
    expect(page.locator("[data-error-for=name]")).not_to_be_empty()
    concierge.refresh_from_db()
    assert concierge.name == "Head Concierge"


def test_change_the_coordinator_of_a_group(open_page, owner):
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    page = open_page(owner, f"/dashboard/groups/{group.pk}/")
    page.get_by_role("button", name="Group menu").click()
    page.get_by_role("menuitem", name="Members").click()
    sheet = page.get_by_role("dialog", name="Members")
    sheet.get_by_text("Change members or coordinator").click()
    sheet.get_by_label("Coordinator").select_option(label="Ledger (@ledger)")
    sheet.get_by_role("button", name="Save members").click()
    expect(sheet).to_be_hidden()
    group.refresh_from_db()
    assert group.coordinator_id == ledger.pk
    page.get_by_role("button", name="Group menu").click()
    page.get_by_role("menuitem", name="Members").click()
    expect(sheet.locator("#member-rows li", has_text="@ledger")).to_contain_text("coordinator")
    expect(sheet.locator("#member-rows li", has_text="@concierge")).not_to_contain_text(
        "coordinator"
    )


def test_remove_an_agent_and_keep_the_built_ins(open_page, owner):
    ledger = teammate(owner, "ledger", "Ledger")
    page = open_page(owner, f"/dashboard/agents/{ledger.pk}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Remove Ledger…").click()
    expect(page).to_have_url(re.compile(r"/dashboard/agents/$"))
    expect(page.locator(".roster-list")).not_to_contain_text("@ledger")
    ledger.refresh_from_db()
    assert ledger.removed_at is not None
    concierge = Agent.objects.get(owner=owner, handle="concierge")
    page.goto(f"/dashboard/agents/{concierge.pk}/")
    expect(page.get_by_role("button", name=re.compile("^Remove"))).to_have_count(0)


def test_add_a_model_account_and_test_it_against_a_real_server(open_page, owner, model_server):
    page = open_page(owner, "/dashboard/agents/")
    page.get_by_role("navigation", name="Dashboard").get_by_role(
        "link", name="Model accounts"
    ).click()
    expect(page).to_have_url(re.compile(r"/dashboard/accounts/$"))
    assert_controls_labelled(page)
    assert_accessible(page)

    form = page.locator("#account-form")
    form.get_by_label("Provider").select_option("openai")
    form.get_by_label("Name").fill("Local server")
    form.get_by_label("Model").fill("m")
    form.get_by_label("Base URL").fill(f"{model_server.url}/v1")
    form.get_by_label("API key").fill(SECRET)
    form.get_by_role("button", name="Add account").click()
    row = account_row(page, "Local server")
    expect(row).to_be_visible()
    expect(row).to_contain_text("your key (stored encrypted)")
    assert SECRET not in page.content()
    account = ModelAccount.objects.get(owner=owner, name="Local server")
    assert account.api_key_encrypted and SECRET not in account.api_key_encrypted

    model_server.push(Respond(200, openai_reply("OK")))
    row.get_by_role("button", name="Test").click()
    expect(row.locator(".test-result")).to_have_text("Works. The model answered: 'OK'")
    call = model_server.last
    assert call.path == "/v1/chat/completions"
    assert call.headers.get("authorization") == f"Bearer {SECRET}"

    model_server.push(Respond(401, {"error": {"message": "bad key"}}))
    row.get_by_role("button", name="Test").click()
    expect(row.locator(".test-result")).to_have_text(
        re.compile(r"^PROVIDER_AUTH_FAILED: The model server refused the key")
    )
    expect(row.locator(".test-result")).not_to_contain_text("bad key")

    # Edit without a key keeps the stored one; the name changes.
    row.get_by_role("button", name="Edit").click()
    row.get_by_label("Name").fill("Local server 2")
    row.get_by_role("button", name="Save").click()
    expect(account_row(page, "Local server 2")).to_be_visible()
    account.refresh_from_db()
    assert account.name == "Local server 2" and account.api_key_encrypted

    # A new base URL without a key drops the stored key, and the page says so by name.
    row = account_row(page, "Local server 2")
    row.get_by_role("button", name="Edit").click()
    row.get_by_label("Base URL").fill(f"{model_server.url}/elsewhere/v1")
    row.get_by_role("button", name="Save").click()
    row = account_row(page, "Local server 2")
    expect(row.locator(".test-result")).to_have_text(re.compile(r"^API_KEY_CLEARED: "))
    expect(row).to_contain_text("no key")
    account.refresh_from_db()
    assert account.api_key_encrypted == ""


def test_an_account_in_use_is_not_deleted_and_says_why(open_page, owner):
    ledger = teammate(owner, "ledger", "Ledger")
    page = open_page(owner, "/dashboard/accounts/")
    row = page.locator(f"#account-{ledger.model_account_id}")
    expect(row.locator("dd").last).to_have_text("Ledger")
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete…").click()
    expect(row.locator(".js-row-error")).to_have_text(
        "Agents use this account; give them another first."
    )
    assert ModelAccount.objects.filter(pk=ledger.model_account_id).exists()


def test_axe_finds_nothing_serious_on_the_roster_agents_and_room(open_page, owner):
    page = open_page(owner)
    assert_accessible(page)
    group = household(owner)
    page.goto("/dashboard/")
    assert_accessible(page)
    page.goto("/dashboard/agents/")
    assert_accessible(page)
    page.goto(f"/dashboard/groups/{group.pk}/")
    expect(page.locator("#live")).to_have_text(re.compile("Live|Connected|^$"))
    assert_accessible(page)
    assert Group.objects.filter(owner=owner).count() == 1


def test_a_scripted_account_is_made_on_the_page_and_its_script_checked(open_page, owner):
    page = open_page(owner, "/dashboard/accounts/")
    form = page.locator("#account-form")
    form.get_by_label("Provider").select_option("scripted")
    expect(form.get_by_label("Base URL")).to_be_hidden()
    form.get_by_label("Name").fill("Scribe's script")
    form.get_by_label("Script (JSON)").fill('{"rules": [')
    form.get_by_role("button", name="Add account").click()
    expect(form.locator("[data-error-for=options]")).to_contain_text("The script is not JSON")
    form.get_by_label("Script (JSON)").fill('{"rules": [{"when": "write", "reply": "Written."}]}')
    form.get_by_role("button", name="Add account").click()
    row = account_row(page, "Scribe's script")
    expect(row).to_be_visible()
    account = ModelAccount.objects.get(owner=owner, name="Scribe's script")
    assert account.provider == "scripted"
    assert account.options == {"rules": [{"when": "write", "reply": "Written."}]}


def test_make_an_access_token_use_it_from_a_script_and_revoke_it(
    open_page, owner, dashboard_server
):
    import httpx

    group = household(owner)
    page = open_page(owner, "/dashboard/tokens/")
    assert_controls_labelled(page)
    assert_accessible(page)
    page.get_by_label("Name").fill("Nightly report")
    page.get_by_label("Your password").fill("wrong password")
    page.get_by_role("button", name="Make token").click()
    expect(page.locator("#token-password-error")).to_have_text("That is not your current password.")
    page.get_by_label("Your password").fill("pw-owner-123")
    page.get_by_role("button", name="Make token").click()
    value = page.get_by_label("Your new token")
    expect(value).to_be_focused()
    secret = value.input_value()
    assert secret.startswith("gdn_")
    expect(page.locator("#token-example")).to_contain_text("Authorization: Bearer gdn_")
    # Listed at once, by its start only.
    expect(page.locator("#token-list")).to_contain_text(secret[:12])
    expect(page.locator("#token-list")).not_to_contain_text("No tokens yet.")

    # A script with the token and nothing else: no session, no CSRF pair.
    url = f"{dashboard_server.url}/api/groups/{group.pk}/messages"
    headers = {"Authorization": f"Bearer {secret}"}
    posted = httpx.post(url, json={"text": "Plan the month."}, headers=headers)
    assert posted.status_code == 202, posted.text

    page.reload()
    assert secret not in page.content()
    row = page.locator(".token", has=page.get_by_role("heading", name="Nightly report"))
    expect(row).to_contain_text(secret[:12])
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Revoke Nightly report").click()
    expect(row).to_have_count(0)
    expect(page.locator("#token-list")).to_contain_text("No tokens yet.")
    refused = httpx.post(url, json={"text": "Again."}, headers=headers)
    assert refused.status_code == 401 and refused.json()["code"] == "TOKEN_REVOKED"


def test_link_telegram_from_its_page(open_page, owner, bot_api):  # noqa: F811
    from tests.telegram.conftest import CHAT, message_update, post_update

    page = open_page(owner, "/dashboard/agents/")
    page.locator(".user-menu summary").click()
    page.get_by_role("link", name="Telegram").click()
    expect(page).to_have_url(re.compile(r"/dashboard/telegram/$"))
    expect(page.locator("#telegram-unlinked")).to_be_visible()
    assert_controls_labelled(page)
    assert_accessible(page)
    page.get_by_role("button", name="Get a code").click()
    command = page.get_by_label("The message to send")
    expect(command).to_have_value(re.compile(r"^/start \S+$"))
    from django.test import Client

    assert (
        post_update(Client(), message_update(command.input_value(), chat_id=CHAT)).status_code
        == 200
    )
    page.reload()
    expect(page.locator("#telegram-linked")).to_contain_text("Linked to")
    assert_accessible(page)
