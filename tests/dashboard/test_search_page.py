"""The search page and the rooms a result opens: the header's search box on every page, results
as links to the room at the turn (never another owner's), a refusal said on the page, older
results a page at a time, and a room asked for a closed thread of its own (``?conversation=``)
showing that thread read-only — another owner's thread id is ignored."""

from __future__ import annotations

import json
import re

import pytest
from django.utils import timezone

from dashboard.views.search import RESULTS_SHOWN
from garden.models import Agent, Conversation
from groups.services.requests import group_conversation_open
from tests.dashboard.helpers import household, say

pytestmark = pytest.mark.django_db


def room_data(html: str) -> dict:
    found = re.search(r'<script id="room-data" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(found.group(1))


def close_thread(group) -> Conversation:
    """The group's open thread closed (as a rollover leaves it); the next turn opens another."""
    thread = group_conversation_open(group=group)
    Conversation.objects.filter(pk=thread.pk).update(
        status=Conversation.Status.CLOSED, closed_at=timezone.now()
    )
    return thread


def test_every_page_has_the_search_box(signed_in):
    html = signed_in.get("/dashboard/").content.decode()
    assert 'role="search"' in html and 'for="dash-search-q"' in html
    assert 'action="/dashboard/search/"' in html


def test_results_link_to_the_room_at_the_turn_and_never_show_a_strangers(
    signed_in, owner, stranger
):
    group = household(owner)
    say(group, text="The rhubarb crowns went in by the shed.")
    turn = say(group, text="Rhubarb again, forced under pots.")
    say(household(stranger), text="Their rhubarb secret.")
    html = signed_in.get("/dashboard/search/", {"q": "rhubarb"}).content.decode()
    assert html.count('class="search-result"') == 2
    assert (
        f'href="/dashboard/groups/{group.pk}/?conversation={turn.conversation_id}'
        f'#turn-{turn.seq}"' in html
    )
    assert "forced under pots" in html and "secret" not in html
    # The header's box is not repeated on the page that has its own.
    assert 'id="dash-search-q"' not in html and 'id="search-page-q"' in html


def test_a_query_search_cannot_read_is_said_on_the_page(signed_in):
    html = signed_in.get("/dashboard/search/", {"q": "x" * 201}).content.decode()
    assert 'role="alert"' in html and "at most 200 characters" in html
    assert 'aria-invalid="true"' in html
    # No query yet: the form alone, no refusal.
    blank = signed_in.get("/dashboard/search/").content.decode()
    assert 'role="alert"' not in blank and "search-results" not in blank


def test_older_results_come_a_page_at_a_time(signed_in, owner):
    group = household(owner)
    for n in range(RESULTS_SHOWN + 3):
        say(group, text=f"compost batch {n}")
    first = signed_in.get("/dashboard/search/", {"q": "compost"}).content.decode()
    assert first.count('class="search-result"') == RESULTS_SHOWN
    older = re.search(r'href="\?q=compost&amp;before=(\d+)"', first)
    assert older, "no link to older results"
    rest = signed_in.get("/dashboard/search/", {"q": "compost", "before": older.group(1)})
    page = rest.content.decode()
    assert page.count('class="search-result"') == 3 and "compost batch 0" in page
    assert "before=" not in page.split("search-results", 1)[1]


def test_a_room_asked_for_its_closed_thread_shows_it_read_only(signed_in, owner, stranger):
    group = household(owner)
    say(group, text="old words")
    closed = close_thread(group)
    say(group, text="new words")
    html = signed_in.get(f"/dashboard/groups/{group.pk}/", {"conversation": closed.pk})
    page = html.content.decode()
    assert room_data(page)["thread"] == closed.pk
    assert "An earlier thread of this room" in page
    assert re.search(r'<form id="composer"[^>]* hidden>', page)
    # The open thread, or another owner's thread id: the room as ever.
    theirs = group_conversation_open(group=household(stranger))
    for asked in (group_conversation_open(group=group).pk, theirs.pk, "x"):
        page = signed_in.get(f"/dashboard/groups/{group.pk}/", {"conversation": asked})
        assert room_data(page.content.decode())["thread"] is None


def test_an_agents_room_opens_the_conversation_asked_for(signed_in, owner, stranger):
    household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    earlier = Conversation.objects.create(
        owner=owner, agent=ledger, status=Conversation.Status.CLOSED, closed_at=timezone.now()
    )
    Conversation.objects.create(owner=owner, agent=ledger)
    url = f"/dashboard/agents/{ledger.pk}/room/"
    page = signed_in.get(url, {"conversation": earlier.pk}).content.decode()
    data = room_data(page)
    assert (
        data["thread"] == earlier.pk and data["urls"]["api"] == f"/api/conversations/{earlier.pk}"
    )
    assert re.search(r'<form id="composer"[^>]* hidden>', page)
    # Another agent's conversation, or another owner's: the agent's open one, as ever.
    household(stranger)
    theirs = Conversation.objects.create(
        owner=stranger, agent=Agent.objects.get(owner=stranger, handle="ledger")
    )
    concierge = Conversation.objects.create(
        owner=owner, agent=Agent.objects.get(owner=owner, handle="concierge")
    )
    for asked in (theirs.pk, concierge.pk, "²"):
        data = room_data(signed_in.get(url, {"conversation": asked}).content.decode())
        assert data["thread"] is None and data["urls"]["api"] != f"/api/conversations/{asked}"


def test_the_page_shares_the_apis_search_rate(client, owner, settings):
    settings.GARDEN_THROTTLE_RATES = {**settings.GARDEN_THROTTLE_RATES, "search": "2/min"}
    client.force_login(owner)
    assert [client.get("/dashboard/search/", {"q": "compost"}).status_code for _ in range(2)] == [
        200,
        200,
    ]
    refused = client.get("/dashboard/search/", {"q": "compost"})
    assert refused.status_code == 429
    assert "the limit for searches is 2 per minute" in refused.content.decode()
