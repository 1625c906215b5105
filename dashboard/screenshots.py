"""``make screenshots``: pictures of the dashboard for people to look at.

Seeds a fresh SQLite database under a temporary directory with scripted agents, serves the
dashboard from this process (daphne and a worker thread, as ``rundashboard`` does), and has
Debian's headless Chromium write PNGs to ``docs/screenshots/`` (the README shows two).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SPENDING = "Review this month's spending and help me decide how much I can save."
SCRIBE_RULES = [
    {"after_tool_error": True, "reply": "Understood: I won't write it."},
    {"after_tool_result": True, "reply": "Saved the plan on the Canvas."},
    {
        "when": "write",
        "reply": {
            "text": "I'll write the plan down.",
            "tool_calls": [
                {
                    "name": "file.write",
                    "arguments": {
                        "title": "Savings plan",
                        "mime_type": "text/markdown",
                        "content": "# Savings plan\n\n| | EUR |\n|---|---:|\n| Income | 4,200 |\n"
                        "| Spending | 3,150 |\n| Left | 1,050 |\n\n"
                        "- Save **800** a month by standing order on payday.\n- Keep a **250** "
                        "buffer for irregular costs.\n- Revisit eating out (310) to reach 1,000.",
                    },
                }
            ],
        },
    },
]


def _setup_django(var_dir: str) -> None:
    os.environ["GARDEN_VAR_DIR"] = var_dir
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def _seed() -> dict:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from garden.models import Agent
    from garden.services.accounts import model_account_create
    from garden.services.agents import agent_create
    from groups.demo import household_finances
    from groups.models import Group, Membership

    call_command("migrate", verbosity=0)
    users = get_user_model().objects
    newcomer = users.create_user(username="newcomer", password="shots-pass-123")
    demo = users.create_user(username="demo", password="shots-pass-123")
    group = household_finances(demo)
    ledger = Agent.objects.get(owner=demo, handle="ledger")
    ledger.model_account.options = {**ledger.model_account.options, "delay": 3}
    ledger.model_account.save(update_fields=["options"])
    account = model_account_create(
        owner=demo,
        name="Scribe (scripted)",
        provider="scripted",
        model="scripted",
        options={"rules": SCRIBE_RULES},
    )
    scribe = agent_create(
        owner=demo,
        handle="scribe",
        name="Scribe",
        model_account=account,
        colour="#16a085",
        enabled_tools=["file.write"],
        approval_tools=["file.write"],
    )
    Membership.objects.create(group=group, agent=scribe, position=3)
    groceries = Group.objects.create(
        owner=demo, name="Weekly groceries", coordinator=group.coordinator
    )
    for position, agent in enumerate((group.coordinator, ledger)):
        Membership.objects.create(group=groceries, agent=agent, position=position)
    return {"newcomer": newcomer, "demo": demo, "group": group}


def _signed_in(browser, base: str, user):
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 860})
    context.set_default_timeout(20_000)
    context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "url": base,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
            }
        ]
    )
    return context.new_page()


def _shoot(browser, base: str, seeded: dict) -> list[Path]:
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    shots: list[Path] = []

    def save(page, name: str) -> None:
        path = OUT / f"{name}.png"
        page.screenshot(path=str(path))
        shots.append(path)

    page = _signed_in(browser, base, seeded["newcomer"])
    page.goto("/dashboard/")
    save(page, "roster-first-run")

    page = _signed_in(browser, base, seeded["demo"])
    page.goto("/dashboard/")
    save(page, "roster")
    page.get_by_role("button", name="New group").click()
    sheet = page.get_by_role("dialog", name="New group")
    sheet.get_by_role("checkbox", name="Concierge").uncheck()
    sheet.get_by_role("button", name="Create group").click()
    expect(sheet.locator("#create-name-error")).not_to_be_empty()
    save(page, "creation-sheet-error")

    group = seeded["group"]
    page.goto(f"/dashboard/groups/{group.pk}/")
    expect(page.locator("#live")).to_have_text("Live")
    page.get_by_label("Message to the group").fill(SPENDING)
    page.get_by_role("button", name="Send").click()
    # Mid-request: Ledger's reply streaming in, the indicator naming it, one line per hand-off.
    expect(page.locator("#transcript .turn.draft")).to_be_visible()
    expect(page.locator("#budget")).to_contain_text("Ledger")
    save(page, "room-mid-request")
    expect(page.locator("#budget")).to_contain_text("Completed")
    save(page, "room-answered")

    page.get_by_label("Message to the group").fill("@scribe please write the plan down")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".approval")).to_be_visible()
    save(page, "room-approval")
    page.locator(".approval").get_by_role("button", name=re.compile("^Approve")).click()
    expect(page.locator("#budget")).to_contain_text("Completed")

    page.get_by_role("button", name="Group menu").click()
    save(page, "room-menu")
    page.keyboard.press("Escape")
    page.locator("#canvas-list .artifact", has_text="Savings plan").click()
    expect(page.locator("#canvas-view")).to_be_visible()
    save(page, "room-canvas")
    page.get_by_role("button", name="Open the document in full").click()
    expect(page.get_by_role("dialog", name="Savings plan")).to_be_visible()
    save(page, "document-full-view")
    page.keyboard.press("Escape")

    # One agent's own room, from the roster: Scribe asks to write, its card waits inline.
    page.goto("/dashboard/")
    page.locator("#agent-list").get_by_role("link", name=re.compile("Scribe")).click()
    expect(page.locator("#live")).to_have_text("Live")
    page.get_by_label("Message to Scribe").fill("Please write the plan down.")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".approval")).to_be_visible()
    save(page, "agent-room")

    concierge = seeded["demo"].agents.get(handle="concierge")
    page.goto(f"/dashboard/agents/{concierge.pk}/")
    save(page, "agent-settings")
    page.goto("/dashboard/documents/")
    save(page, "documents")
    page.goto("/dashboard/accounts/")
    page.locator(".account").first.get_by_role("button", name="Test").click()
    expect(page.locator(".test-result").first).to_contain_text("Works")
    save(page, "model-accounts")
    return shots


def main() -> int:
    if not os.path.exists(CHROMIUM):
        print(f"{CHROMIUM} is missing: apt-get install -y chromium", file=sys.stderr)
        return 1
    var_dir = tempfile.mkdtemp(prefix="garden-screenshots-")
    try:
        _setup_django(var_dir)
        from playwright.sync_api import sync_playwright

        from dashboard.serving import EmbeddedWorker, ThreadedDaphne

        seeded = _seed()
        OUT.mkdir(exist_ok=True)
        server = ThreadedDaphne().start()
        # The ORM is used on this thread while Playwright's sync API holds an event loop here.
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
        with EmbeddedWorker(concurrency=2, beat=False), sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            shots = _shoot(browser, server.url, seeded)
            browser.close()
        server.stop()
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)
    for path in shots:
        print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
