"""An agent's room lists its conversations, the one spoken in last first, each a link that opens
it in the room (the one shown marked current); a bare room opens the one spoken in last, and
its Canvas follows the conversation shown."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from garden.models import Agent, Conversation, Message
from garden.services.conversations import message_append, text_block
from tests.dashboard.helpers import household

pytestmark = pytest.mark.django_db


def room_data(html: str) -> dict:
    found = re.search(r'<script id="room-data" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(found.group(1))


def links(html: str) -> list[tuple[str, bool, str]]:
    """The list's entries: (conversation id, current?, label)."""
    return [
        (m.group(1), bool(m.group(2)), m.group(3))
        for m in re.finditer(
            r'<a class="thread-link" href="[^"]*\?conversation=(\d+)"( aria-current="page")?>\s*'
            r'<span class="thread-label[^"]*">([^<]*)</span>',
            html,
        )
    ]


def said(conversation, text: str, *, minutes_ago: int) -> None:
    message = message_append(
        conversation_id=conversation.pk, speaker_kind="owner", content=[text_block(text)]
    )
    Message.objects.filter(pk=message.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes_ago)
    )


def test_the_room_lists_its_conversations_and_opens_the_one_spoken_in_last(signed_in, owner):
    household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    older = Conversation.objects.create(owner=owner, agent=ledger, title="Taxes")
    newer = Conversation.objects.create(owner=owner, agent=ledger)
    Conversation.objects.filter(pk__in=[older.pk, newer.pk]).update(
        created_at=timezone.now() - timedelta(hours=1)
    )
    said(newer, "How much is left for the holiday?", minutes_ago=30)
    said(older, "File the return", minutes_ago=5)
    url = f"/dashboard/agents/{ledger.pk}/room/"

    html = signed_in.get(url).content.decode()
    assert links(html) == [
        (str(older.pk), True, "Taxes"),
        (str(newer.pk), False, "How much is left for the holiday?"),
    ]
    data = room_data(html)
    assert data["urls"]["api"] == f"/api/conversations/{older.pk}"
    assert data["conversation"]["id"] == older.pk and data["agent"] == ledger.pk
    assert data["urls"]["canvas"].endswith(f"?conversation={older.pk}")
    assert 'id="thread-rename"' in html and 'aria-label="Rename Taxes"' in html

    html = signed_in.get(url, {"conversation": newer.pk}).content.decode()
    assert [current for _, current, _ in links(html)] == [False, True]
    urls = room_data(html)["urls"]
    assert urls["socket"] == f"/ws/conversations/{newer.pk}/"
    assert signed_in.get(urls["canvas"]).status_code == 200


def test_a_first_visit_makes_one_untitled_conversation(signed_in, owner):
    household(owner)
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    html = signed_in.get(f"/dashboard/agents/{ledger.pk}/room/").content.decode()
    (made,) = Conversation.objects.filter(owner=owner, agent=ledger)
    assert made.title == ""
    assert links(html) == [(str(made.pk), True, "New conversation")]
    assert 'aria-controls="threads-body"' in html and "New conversation</button>" in html
