"""An agent's reply notifies its owner — on their open dashboard pages (a
``notification.reply`` event on their notifications channel) and on their linked Telegram chat
— through a real worker and a local Bot API server. A muted agent sends nothing on either; a
group sends nothing of its own (a member's reply notifies as that member, the group named in
the text); approvals are not muted."""

from __future__ import annotations

import pytest

from garden.models import Agent
from groups.models import Approval
from groups.services.requests import request_create
from notifications.models import AgentMute, NotificationSettings
from notifications.payloads import owner_channel
from telegram_approvals.models import TelegramApprovalMessage
from tests.conftest import wait_for
from tests.dashboard.helpers import teammate
from tests.groups.helpers import one_to_one
from tests.support.driving import finished
from tests.support.workers import worker_quiescent
from tests.telegram.conftest import CHAT

pytestmark = pytest.mark.timeout(90)

ASK_LEDGER = {"name": "group.ask", "arguments": {"member": "ledger", "request": "Add it up."}}


@pytest.fixture
def team(group_factory):
    """Concierge asks Ledger, Ledger answers, Concierge concludes."""
    return group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "You can save 800 a month."},
            {"reply": {"text": "Asking Ledger.", "tool_calls": [ASK_LEDGER]}},
        ],
        members={"ledger": [{"reply": "Spending came to 2,100."}]},
        name="Household",
    )


def notices(captured, owner) -> list[dict]:
    channel = owner_channel(owner.pk)
    found = []
    for name, payload in captured:
        events = payload["events"] if payload.get("type") == "batch" else [payload]
        found += [e for e in events if name == channel and e["type"] == "notification.reply"]
    return found


def texts(bot_api) -> list[str]:
    """What garden sent the chat that is not an approval (no buttons) or the link's answer."""
    return [
        c.params["text"]
        for c in bot_api.calls_of("sendMessage")
        if "reply_markup" not in c.params and not c.params["text"].startswith("Linked")
    ]


def run(request) -> None:
    wait_for(finished(request), timeout=60)
    worker_quiescent()


@pytest.fixture
def telegram_on(linked):
    NotificationSettings.objects.create(owner=linked, browser=True, telegram=True)
    return linked


def test_a_members_reply_notifies_as_the_member_and_the_conclusion_as_the_coordinator(
    celery_worker_thread, captured_events, bot_api, telegram_on, owner, team
):
    request = request_create(group=team, text="How much can I save?")
    run(request)
    request.refresh_from_db()
    assert request.state == "completed", request.outcome
    shown = notices(captured_events, owner)
    assert [(n["agent"]["handle"], n["title"], n["body"]) for n in shown] == [
        ("ledger", "Ledger in Household", "Spending came to 2,100."),
        ("concierge", "Concierge in Household", "You can save 800 a month."),
    ]
    # Never as the group: every notice names its agent; the ask and its answer are not replies.
    assert all(n["group"] == team.pk and n["group_name"] == "Household" for n in shown)
    assert all(n["url"] == f"/dashboard/groups/{team.pk}/" for n in shown)
    assert texts(bot_api) == [
        "Ledger in Household:\nSpending came to 2,100.",
        "Concierge in Household:\nYou can save 800 a month.",
    ]
    assert all(c.params["chat_id"] == CHAT for c in bot_api.calls_of("sendMessage"))


def test_a_muted_agent_sends_nothing_on_either_channel_and_the_others_still_do(
    celery_worker_thread, captured_events, bot_api, telegram_on, owner, team
):
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    AgentMute.objects.create(owner=owner, agent=ledger)
    run(request_create(group=team, text="How much can I save?"))
    assert [n["agent"]["handle"] for n in notices(captured_events, owner)] == ["concierge"]
    assert texts(bot_api) == ["Concierge in Household:\nYou can save 800 a month."]


def test_an_agents_own_room_notifies_without_a_group(
    celery_worker_thread, captured_events, bot_api, telegram_on, owner
):
    ledger = teammate(owner, "ledger", "Ledger", rules=[{"reply": "Rent is 1,400."}])
    request = one_to_one(owner, ledger, "What is the rent?")
    run(request)
    (shown,) = notices(captured_events, owner)
    assert (shown["title"], shown["body"], shown["group"]) == ("Ledger", "Rent is 1,400.", None)
    # Opened at the conversation the reply is in: the agent's room holds several.
    assert shown["url"] == (
        f"/dashboard/agents/{ledger.pk}/room/?conversation={request.conversation_id}"
    )
    assert texts(bot_api) == ["Ledger:\nRent is 1,400."]


def test_telegram_off_or_browser_off_sends_nothing_there(
    celery_worker_thread, captured_events, bot_api, linked, owner, team
):
    NotificationSettings.objects.create(owner=owner, browser=False, telegram=False)
    run(request_create(group=team, text="How much can I save?"))
    assert notices(captured_events, owner) == []
    assert texts(bot_api) == []


def test_a_long_reply_is_clipped_to_telegrams_limit(
    celery_worker_thread, captured_events, bot_api, telegram_on, owner, group_factory
):
    long = "word " * 2_000
    group = group_factory(concierge_rules=[{"reply": long}], members={})
    run(request_create(group=group, text="Say a lot."))
    (sent,) = texts(bot_api)
    assert len(sent) <= 4096 and sent.endswith("…")
    (shown,) = notices(captured_events, owner)
    assert len(shown["body"]) <= 200


def test_a_telegram_failure_never_fails_the_reply(
    celery_worker_thread, captured_events, bot_api, telegram_on, owner, team
):
    bot_api.fail("sendMessage", 403, "Forbidden: bot was blocked by the user")
    request = request_create(group=team, text="How much can I save?")
    run(request)
    request.refresh_from_db()
    assert request.state == "completed"
    assert len(notices(captured_events, owner)) == 2


def test_approvals_of_a_muted_agent_are_still_sent(
    celery_worker_thread, bot_api, telegram_on, owner, writing_group
):
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    AgentMute.objects.create(owner=owner, agent=ledger)
    request = request_create(group=writing_group, text="Write down the savings plan.")
    approval = wait_for(
        lambda: Approval.objects.filter(request=request, status="pending").first(), timeout=60
    )
    sent = bot_api.wait_for("sendMessage", lambda c: "reply_markup" in c.params)
    assert sent.params["text"].startswith("Ledger wants to write")
    assert wait_for(
        lambda: TelegramApprovalMessage.objects.filter(
            approval=approval, message_id__isnull=False
        ).exists()
    )
