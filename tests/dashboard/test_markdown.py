"""Markdown in the room, in Chromium: turns, drafts and documents read as formatted text, and no
model text — whatever it holds — makes an element or an attribute outside the allowlist, a link
to anything but http(s) or mailto, or a script that runs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from playwright.sync_api import expect

from garden.models import Agent
from tests.dashboard.conftest import assert_accessible, open_room, send
from tests.dashboard.helpers import artifact, household, say
from tests.garden.providers.httpserver import ScriptedServer
from tests.groups.helpers import on_server, openai_stream
from tests.support.providers import openai_reply

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

# What the room may show of a text, by the sanitiser's allowlist (dashboard/static/dashboard/
# markdown.js); the test holds the page to it independently.
TAGS = {
    "DIV", "P", "BR", "STRONG", "EM", "S", "DEL", "CODE", "PRE", "BLOCKQUOTE", "HR", "UL", "OL",
    "LI", "H1", "H2", "H3", "H4", "H5", "H6", "A", "TABLE", "THEAD", "TBODY", "TR", "TH", "TD",
}  # fmt: skip
ATTRIBUTES = {"class", "href", "title", "start", "target", "rel", "tabindex"}

# Every element under the rendered box, its attributes and any link's address.
INSPECT = """texts => texts.map(text => {
  const box = window.garden.markdown.render(text);
  return [box, ...box.querySelectorAll("*")].map(el => ({
    tag: el.tagName,
    attrs: [...el.attributes].map(a => a.name),
    tabindex: el.getAttribute("tabindex"),
    href: el.getAttribute("href"),
    rel: el.getAttribute("rel"),
  }));
})"""

HOSTILE = [
    "<script>window.pwned=1</script>",
    "<img src=x onerror=window.pwned=1>",
    "[click](javascript:window.pwned=1)",
    "[x](JaVaScRiPt:alert(1))",
    "[x](data:text/html,<script>alert(1)</script>)",
    "[x](vbscript:msgbox)",
    "![pic](http://127.0.0.1:9/track.png)",
    "<a href=javascript:alert(1)>a</a>",
    '<svg onload="window.pwned=1">',
    "<iframe src=//127.0.0.1:9></iframe>",
    "<details open ontoggle=window.pwned=1>",
    "<style>body{display:none}</style>",
    "<!-- comment -->",
    '"><b onmouseover=alert(1)>',
    "<http://127.0.0.1:9/>",
    "`code` **bold** _em_ ~~gone~~",
    "```\n<script>x</script>\n```",
    "| a | b |\n|---|---|\n| <i>1</i> | 2 |",
    "1. one\n2. two",
    "> quote",
    "# title",
    "&lt;script&gt;",
    "\u0000",
    "\u2028",
]
ALPHABET = "<>\"'=/&:;()[]!*_#`~|\\\n -.azAZ09"
model_text = st.lists(
    st.one_of(st.sampled_from(HOSTILE), st.text(alphabet=ALPHABET, max_size=12)), max_size=8
).map("".join)


def test_no_model_text_makes_anything_outside_the_allowlist(open_page, owner):
    page = open_room(open_page, owner, household(owner))
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

    @settings(max_examples=150, deadline=None, database=None)
    @given(st.lists(model_text, min_size=1, max_size=25))
    def check(texts: list[str]) -> None:
        for elements in page.evaluate(INSPECT, texts):
            for el in elements:
                assert el["tag"] in TAGS, el
                assert set(el["attrs"]) <= ATTRIBUTES, el
                if el["href"] is not None:
                    assert el["href"].lower().startswith(("http:", "https:", "mailto:")), el
                if el["tag"] == "A":
                    assert el["rel"] == "noopener noreferrer nofollow", el
                # Only the page makes a region focusable, and only one that may scroll.
                if el["tabindex"] is not None:
                    assert el["tag"] in ("PRE", "TABLE") and el["tabindex"] == "0", el

    check()
    page.evaluate(INSPECT, HOSTILE)  # every hostile sample, once more, on its own
    assert page.evaluate("window.pwned") is None
    assert dialogs == []


def test_a_reply_with_scripts_and_raw_html_renders_inert_in_the_room(open_page, owner):
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    say(group, speaker=ledger, text="\n\n".join(HOSTILE[:6]) + "\n\nend of reply")
    page = open_room(open_page, owner, group)
    turn = page.locator("#transcript .turn", has_text="end of reply")
    expect(turn).to_be_visible()
    # The words are shown as words; nothing of them became an element.
    expect(turn).to_contain_text("<script>window.pwned=1</script>")
    expect(turn).to_contain_text("<img src=x onerror=window.pwned=1>")
    for selector in ("script", "img", "iframe", "svg", "style", "details"):
        assert turn.locator(selector).count() == 0, selector
    links = turn.locator("a")
    for i in range(links.count()):
        href = links.nth(i).get_attribute("href")
        assert href is None or href.startswith(("http:", "https:", "mailto:")), href
    assert page.evaluate("window.pwned") is None


def test_turns_drafts_and_documents_read_as_formatted_text(open_page, owner, live_worker):
    group = household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    say(
        group,
        speaker=ledger,
        text="**Net 1,050.**\n\n- rent 1,400\n- groceries 520\n\n```\nsave = 800\n```\n\n"
        "See https://example.org/budget for more.",
    )
    say(group, text="Thanks, **that** helps")
    artifact(group, agent=ledger, title="plan.md", content="# Savings plan\n\n1. Save *800*")
    page = open_room(open_page, owner, group)
    turn = page.locator("#transcript .turn--agent", has_text="Net 1,050")
    expect(turn.locator("strong")).to_have_text("Net 1,050.")
    expect(turn.locator("ul > li")).to_have_count(2)
    expect(turn.locator("pre code")).to_have_text("save = 800\n")
    link = turn.locator("a", has_text="https://example.org/budget")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer nofollow")
    expect(page.locator("#transcript .turn--owner strong")).to_have_text("that")

    page.locator("#canvas-list .artifact", has_text="plan.md").click()
    doc = page.locator("#canvas-view-doc")
    expect(doc.locator("h1")).to_have_text("Savings plan")
    expect(doc.locator("ol em")).to_have_text("800")
    expect(page.locator("#canvas-view-content")).to_be_hidden()
    assert_accessible(page)


def test_a_draft_is_rendered_as_it_grows(open_page, owner, live_worker, loopback_providers):
    group = household(owner)
    server = ScriptedServer()
    try:
        on_server(owner, Agent.objects.get(owner=owner, handle="concierge"), server)
        answer = "**Save 800** a month:\n\n- by standing order\n- on payday, " + "steadily " * 20
        server.stream(*openai_stream(openai_reply(answer), pieces=12), interval=0.3)
        page = open_room(open_page, owner, group)
        send(page, "How much can I save?")
        draft = page.locator("#transcript .turn.draft")
        expect(draft.locator("strong")).to_have_text("Save 800")
        expect(draft.locator("ul > li").first).to_have_text("by standing order")
        assert draft.locator(".md").count() == 1
        turn = page.locator("#transcript .turn--agent", has_text="steadily")
        expect(turn.locator("strong")).to_have_text("Save 800")
        expect(draft).to_have_count(0)
    finally:
        server.close()
