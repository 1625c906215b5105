"""Each http.fetch an agent makes leaves a visit for the Canvas: the URL, the page's title, the
status, the agent and an excerpt of its text — plain text, tags stripped, clipped — against a
real HTTP server on 127.0.0.1. A refused fetch leaves none; visits stay few whatever the
fetching, are not documents and take nothing of the owner's storage."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from garden.models import Artifact, Conversation
from garden.models.memory import PageVisit
from garden.storage import storage_usage
from garden.tools import run_tool
from garden.tools.visits import EXCERPT_CHARS, VISITS_KEPT
from tests.garden.test_storage import ctx_for, fill

pytestmark = pytest.mark.django_db

PAGE = b"""<!doctype html>
<html><head><title>  Savings
  &amp; rates </title>
<style>body { color: red }</style>
<script>document.title = "hijacked"</script></head>
<body><h1>Rates today</h1>
<p>Fixed deposits pay <b>3.1</b>%.</p><p>Savers <em>gain</em>.</p>
<p>Shown as code: &lt;script&gt;alert(1)&lt;/script&gt;</p>
<script>alert("never text")</script>
</body></html>"""


class Site:
    """A small site on 127.0.0.1: path -> (status, content type, body)."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, str, bytes]] = {}
        pages = self.pages

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, kind, body = pages.get(self.path, (404, "text/plain", b"not here"))
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def site(settings) -> Iterator[Site]:
    settings.GARDEN_EGRESS_ALLOW = ["127.0.0.1/32"]
    s = Site()
    yield s
    s.close()


def visits() -> list[PageVisit]:
    return list(PageVisit.objects.order_by("id"))


def test_a_fetched_html_page_is_kept_as_a_visit_by_the_agent(owner, site):
    site.pages["/rates"] = (200, "text/html; charset=utf-8", PAGE)
    ctx = ctx_for(owner)
    out = run_tool(ctx, "http.fetch", {"url": f"{site.url}/rates"})
    assert not out.is_error and out.content.startswith("HTTP 200\n<!doctype html>")
    [visit] = visits()
    assert (visit.agent_id, visit.conversation_id, visit.owner_id) == (
        ctx.agent_id,
        ctx.conversation_id,
        owner.pk,
    )
    assert (visit.url, visit.status, visit.title, visit.error) == (
        f"{site.url}/rates",
        200,
        "Savings & rates",
        "",
    )
    # Text only: the page's tags, styles and scripts are gone; markup it showed as text stays
    # text (unescaped once, never parsed again).
    assert visit.excerpt == (
        "Rates today Fixed deposits pay 3.1%. Savers gain. Shown as code: <script>alert(1)</script>"
    )
    assert "never text" not in visit.excerpt and "hijacked" not in visit.excerpt
    # Browsing, not a document: no artifact, nothing of the owner's storage.
    assert not Artifact.objects.exists() and storage_usage(owner_id=owner.pk).artifacts == 0


def test_a_plain_text_answer_has_no_title_and_its_excerpt_is_clipped(owner, site):
    site.pages["/data.txt"] = (200, "text/plain", ("word " * 500).encode())
    run_tool(ctx_for(owner), "http.fetch", {"url": f"{site.url}/data.txt"})
    [visit] = visits()
    assert visit.title == "" and visit.url == f"{site.url}/data.txt"
    assert len(visit.excerpt) == EXCERPT_CHARS and visit.excerpt.endswith("…")
    assert visit.excerpt.startswith("word word")


def test_an_error_status_and_a_picture_are_visits_with_their_status(owner, site):
    site.pages["/pic.png"] = (200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 50)
    ctx = ctx_for(owner)
    missing = run_tool(ctx, "http.fetch", {"url": f"{site.url}/gone"})
    assert missing.is_error
    run_tool(ctx, "http.fetch", {"url": f"{site.url}/pic.png"})
    gone, picture = visits()
    assert (gone.status, gone.excerpt) == (404, "not here")
    assert (picture.status, picture.excerpt) == (200, "")


def test_a_refused_fetch_leaves_no_visit_and_an_unreachable_host_leaves_its_error(
    owner, site, settings
):
    ctx = ctx_for(owner)
    refused = run_tool(ctx, "http.fetch", {"url": "http://10.0.0.1/"})
    assert refused.code == "EGRESS_REFUSED"
    assert visits() == []
    site.close()  # nothing listens there now
    down = run_tool(ctx, "http.fetch", {"url": f"{site.url}/rates"})
    assert down.code == "FETCH_FAILED"
    [visit] = visits()
    assert visit.status is None and visit.error == "FETCH_FAILED"
    assert visit.excerpt.startswith("ConnectError")


def test_an_owner_keeps_only_the_newest_visits(owner, stranger, site, settings):
    site.pages["/"] = (200, "text/html", b"<title>Home</title><p>hi</p>")
    theirs = ctx_for(stranger)
    run_tool(theirs, "http.fetch", {"url": f"{site.url}/"})
    ctx = ctx_for(owner)
    for _ in range(VISITS_KEPT + 3):
        run_tool(ctx, "http.fetch", {"url": f"{site.url}/"})
    mine = PageVisit.objects.filter(owner=owner)
    assert mine.count() == VISITS_KEPT
    assert PageVisit.objects.filter(owner=stranger).count() == 1
    # The oldest went: the kept ones are the newest.
    assert min(mine.values_list("pk", flat=True)) > PageVisit.objects.get(owner=stranger).pk + 3


def test_a_full_storage_takes_nothing_from_fetching(owner, site, settings):
    settings.GARDEN_MAX_STORAGE_BYTES_PER_OWNER = 10_000
    fill(owner, 10_000)
    site.pages["/"] = (200, "text/html", b"<title>Home</title><p>hi</p>")
    out = run_tool(ctx_for(owner), "http.fetch", {"url": f"{site.url}/"})
    assert not out.is_error and out.content.endswith("<p>hi</p>")
    [visit] = visits()
    assert visit.title == "Home" and storage_usage(owner_id=owner.pk).artifacts == 10_000


def test_visits_are_not_documents_and_go_with_their_thread(owner, site):
    site.pages["/"] = (200, "text/html", b"<title>Home</title><p>hello there</p>")
    ctx = ctx_for(owner)
    run_tool(ctx, "http.fetch", {"url": f"{site.url}/"})
    run_tool(ctx, "file.write", {"title": "Notes", "content": "n"})
    listed = run_tool(ctx, "file.list", {})
    assert "Notes" in listed.content and "Home" not in listed.content
    assert len(visits()) == 1
    # Clearing the thread takes its browsing along; the document stays in the library.
    Conversation.objects.filter(pk=ctx.conversation_id).delete()
    assert visits() == [] and Artifact.objects.filter(title="Notes").exists()
