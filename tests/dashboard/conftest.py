"""Browser tests of the dashboard: Debian's headless Chromium driven by Playwright, against
daphne in a thread of this process and a real Celery worker thread, on the test database.

With the in-memory channel layer both live in this process, so a room's events travel from
the worker to the page as they do under ``manage.py rundashboard``. Tests marked ``browser``
skip with a reason when Chromium or Playwright is missing, unless GARDEN_REQUIRE_SERVICES=1
(CI), which turns the skip into a failure.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings

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
REQUIRE = os.environ.get("GARDEN_REQUIRE_SERVICES") == "1"
# Generous for a loaded 2-core machine; a healthy step takes milliseconds.
EXPECT_TIMEOUT_MS = 15_000


def _browser_missing() -> str | None:
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} is missing (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (pip install -e '.[dev]')"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("browser"):
        reason = _browser_missing()
        if reason:
            if REQUIRE:
                pytest.fail(f"GARDEN_REQUIRE_SERVICES=1 but {reason}", pytrace=False)
            pytest.skip(reason)


@pytest.fixture(scope="session")
def dashboard_server(django_db_setup, django_db_blocker) -> Iterator[Any]:
    """daphne serving config.asgi (plus static files) on a free port, for the whole session:
    Twisted's reactor cannot be restarted in one process."""
    from dashboard.serving import ThreadedDaphne

    # The server's threads close their connection after each request, so none is left open
    # when the test database is dropped at the end of the session.
    database = settings.DATABASES["default"]
    max_age = database.get("CONN_MAX_AGE", 0)
    database["CONN_MAX_AGE"] = 0
    with django_db_blocker.unblock():
        server = ThreadedDaphne().start()
    yield server
    server.stop()
    database["CONN_MAX_AGE"] = max_age


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One browser per test module. Playwright's sync API keeps an event loop on this thread
    while it runs, which Django's ORM takes for an async context; the tests' own ORM calls are
    plain synchronous code, so the check is lifted for the module's life only (the consumer's
    own tests run without it)."""
    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def open_page(chromium, dashboard_server, transactional_db) -> Iterator[Callable[..., Any]]:
    """``open_page(user, path)``: a fresh browser context signed in as ``user`` (a session
    cookie made by Django's test client), at ``path``. Page errors and Content Security Policy
    violations fail the test."""
    from django.test import Client
    from playwright.sync_api import expect

    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    contexts = []
    errors: list[str] = []

    def open_(user=None, path: str = "/dashboard/") -> Any:
        context = chromium.new_context(
            base_url=dashboard_server.url, viewport={"width": 1280, "height": 900}
        )
        context.set_default_timeout(EXPECT_TIMEOUT_MS)
        contexts.append(context)
        if user is not None:
            client = Client()
            client.force_login(user)
            cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
            context.add_cookies(
                [
                    {
                        "name": settings.SESSION_COOKIE_NAME,
                        "value": cookie,
                        "url": dashboard_server.url,
                    }
                ]
            )
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
        # The Content Security Policy holds on every page a test opens: a violation fails it.
        page.on(
            "console",
            lambda msg: (
                errors.append(f"CSP: {msg.text}") if "Content Security Policy" in msg.text else None
            ),
        )
        page.goto(path)
        return page

    yield open_
    for context in contexts:
        context.close()
    assert not errors, errors


@pytest.fixture
def live_worker(celery_worker_thread):
    """The real in-process worker; a name that says why a browser test needs it."""
    return celery_worker_thread


def assert_controls_labelled(page: Any) -> None:
    """Every visible control has an accessible name and is reachable by keyboard."""
    problems = page.evaluate("""() => {
      const controls = document.querySelectorAll(
        "a[href], button, input:not([type=hidden]), select, textarea, summary, "
        + "[tabindex]:not([tabindex='-1']), [role=button], [role=menuitem], [role=option]");
      const out = [];
      for (const el of controls) {
        if (!el.getClientRects().length || getComputedStyle(el).visibility === "hidden") continue;
        const labelled = el.getAttribute("aria-label") || el.getAttribute("aria-labelledby")
          || (el.labels && el.labels.length) || el.textContent.trim() || el.getAttribute("title")
          || (el.tagName === "INPUT" && ["submit", "button"].includes(el.type) && el.value);
        if (!labelled) out.push(`unlabelled: ${el.outerHTML.slice(0, 120)}`);
        if (el.tabIndex < 0 && !el.closest("[role=menu],[role=listbox]")) {
          out.push(`not reachable by keyboard: ${el.outerHTML.slice(0, 120)}`);
        }
      }
      return out;
    }""")
    assert not problems, problems


def assert_accessible(page: Any) -> None:
    """axe-core finds no serious or critical violation on the page as it is now."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    found = [
        f"{v['id']} ({v['impact']}): {v['help']} — "
        + "; ".join(node["target"][0] if node["target"] else "?" for node in v["nodes"][:3])
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert not found, found


def tab_until(page: Any, selector: str, *, limit: int = 60) -> None:
    """Press Tab until the element matching ``selector`` has focus; fail if it never does."""
    target = page.locator(selector)
    for _ in range(limit):
        page.keyboard.press("Tab")
        if target.evaluate("el => el === document.activeElement"):
            return
    pytest.fail(f"{selector} was not reached with Tab in {limit} presses")


def room_url(group: Any) -> str:
    return f"/dashboard/groups/{group.pk}/"


def open_room(open_page: Callable[..., Any], user: Any, group: Any) -> Any:
    """The group's room, signed in as ``user``, once its live connection is up."""
    from playwright.sync_api import expect

    page = open_page(user, room_url(group))
    expect(page.locator("#live")).to_have_text("Live")
    return page


def send(page: Any, text: str) -> None:
    page.get_by_label("Message to the group").fill(text)
    page.get_by_role("button", name="Send").click()


def text_of(page: Any, selector: str) -> str:
    return re.sub(r"\s+", " ", page.locator(selector).inner_text()).strip()
