"""A member's pending approval on Telegram, end to end through a real worker and a local Bot
API server: sent with Approve / Reject buttons, decided by a press through the one decide
path (exactly once), and the message edited to say what happened wherever it was decided."""

from __future__ import annotations

import pytest
from django.test import Client

from garden.models import Artifact, Message
from groups.models import Approval, Group, GroupRequest
from groups.services.approvals import approval_decide
from groups.services.groups import group_clear, group_delete
from groups.services.requests import request_create, request_stop_active
from telegram_approvals.models import TelegramApprovalMessage
from telegram_approvals.services import HELP, link_code_create
from tests.conftest import wait_for
from tests.support.workers import worker_quiescent
from tests.telegram.conftest import (
    CHAT,
    OTHER_CHAT,
    message_update,
    post_update,
    press_update,
)


def state_of(request) -> str:
    request.refresh_from_db()
    return request.state


def sent_approval(bot_api, request):
    """The pending approval of ``request`` and the Telegram message it was sent as."""
    approval = wait_for(
        lambda: Approval.objects.filter(request=request, status="pending").first(), timeout=30
    )
    sent = bot_api.wait_for("sendMessage", lambda c: "reply_markup" in c.params)
    row = wait_for(
        lambda: TelegramApprovalMessage.objects.filter(
            approval=approval, message_id__isnull=False
        ).first()
    )
    return approval, sent, row


def answers(bot_api) -> list[str]:
    return [c.params["text"] for c in bot_api.calls_of("answerCallbackQuery")]


def edited_to(bot_api, message_id: int, text: str):
    return bot_api.wait_for(
        "editMessageText",
        lambda c: int(c.params["message_id"]) == message_id and text in c.params["text"],
    )


def test_link_then_approve_on_telegram_runs_the_action_once_and_both_sides_say_so(
    celery_worker_thread, bot_api, api, owner, writing_group
):
    web = Client()
    # The owner links their chat with a code from the dashboard.
    code = api.post("/api/telegram/link-code").json()["code"]
    assert post_update(web, message_update(f"/start {code}")).status_code == 200
    bot_api.wait_for("sendMessage", lambda c: c.params["text"].startswith("Linked"))

    request = request_create(group=writing_group, text="Write down the savings plan.")
    approval, sent, row = sent_approval(bot_api, request)
    assert state_of(request) == "awaiting_approval"
    assert sent.params["chat_id"] == CHAT
    assert sent.params["text"].startswith("Ledger wants to write Savings plan (in Team)")
    assert "• content: Save 800 a month." in sent.params["text"]
    buttons = sent.params["reply_markup"]["inline_keyboard"][0]
    assert [(b["text"], b["callback_data"]) for b in buttons] == [
        ("Approve", f"ap:{approval.pk}:a"),
        ("Reject", f"ap:{approval.pk}:r"),
    ]

    # The press, as Telegram posts it to the webhook.
    press = press_update(f"ap:{approval.pk}:a", message_id=row.message_id)
    assert post_update(web, press).status_code == 200
    wait_for(lambda: state_of(request) == "completed", timeout=30)
    assert Artifact.objects.filter(title="Savings plan").count() == 1
    approval.refresh_from_db()
    assert (approval.status, approval.surface, approval.decided_by) == (
        "approved",
        "telegram",
        owner,
    )
    # The room says it was approved on Telegram.
    activity = [m.text for m in Message.objects.filter(request=request, kind="activity")]
    assert any(
        line.startswith("Ledger ") and "(approved on telegram)" in line for line in activity
    ), activity
    # The chat is told: the press answered, the message edited to the outcome, buttons gone.
    bot_api.wait_for("answerCallbackQuery", lambda c: c.params["text"].startswith("Approved"))
    edit = edited_to(bot_api, row.message_id, "Approved by you on Telegram — it ran.")
    assert "reply_markup" not in edit.params

    # A second press, and a conflicting one: already decided; nothing runs again.
    assert post_update(web, press_update(f"ap:{approval.pk}:a")).status_code == 200
    assert post_update(web, press_update(f"ap:{approval.pk}:r")).status_code == 200
    wait_for(lambda: len(answers(bot_api)) >= 3)
    assert answers(bot_api)[1:] == ["Already approved by you on Telegram — it ran."] * 2
    worker_quiescent()
    assert Artifact.objects.filter(title="Savings plan").count() == 1
    assert len(bot_api.calls_of("sendMessage")) == 2  # "Linked", and the approval once


@pytest.fixture
def linked_approval(celery_worker_thread, bot_api, linked, writing_group):
    request = request_create(group=writing_group, text="Write down the savings plan.")
    approval, _sent, row = sent_approval(bot_api, request)
    return request, approval, row


def test_a_limited_or_unreachable_bot_api_is_tried_again_until_the_approval_is_sent(
    celery_worker_thread, bot_api, linked, writing_group
):
    """Telegram limits the bot (429, retry after a second), then a gateway fails: the task is
    delivered again after the wait Telegram asked for, then after a back-off, and the third
    try sends the approval — once."""
    bot_api.fail("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1)
    bot_api.fail("sendMessage", 502, "Bad Gateway")
    request = request_create(group=writing_group, text="Write down the savings plan.")
    _approval, _sent, row = sent_approval(bot_api, request)
    assert len(bot_api.calls_of("sendMessage")) == 3
    assert row.message_id is not None
    worker_quiescent()
    assert len(bot_api.calls_of("sendMessage")) == 3, "sent once, not again"


def test_a_decision_in_the_dashboard_edits_the_telegram_message(bot_api, api, linked_approval):
    request, approval, row = linked_approval
    decided = api.post(f"/api/approvals/{approval.pk}/decide", {"decision": "reject"})
    assert decided.status_code == 200, decided.content
    edited_to(bot_api, row.message_id, "Rejected by you in the dashboard; it did not run.")
    wait_for(lambda: state_of(request) == "completed", timeout=30)
    # A press after it is told so, and decides nothing.
    assert post_update(Client(), press_update(f"ap:{approval.pk}:a")).status_code == 200
    bot_api.wait_for(
        "answerCallbackQuery",
        lambda c: c.params["text"] == "Already rejected by you in the dashboard; it did not run.",
    )
    assert Artifact.objects.count() == 0


def test_stop_edits_the_message_and_a_late_press_is_already_decided(bot_api, linked_approval):
    request, approval, row = linked_approval
    request_stop_active(group=request.group)
    edited_to(bot_api, row.message_id, "Rejected: the request was stopped.")
    assert post_update(Client(), press_update(f"ap:{approval.pk}:a")).status_code == 200
    bot_api.wait_for(
        "answerCallbackQuery",
        lambda c: c.params["text"] == "Already rejected: the request was stopped.",
    )
    worker_quiescent()
    approval.refresh_from_db()
    assert approval.status == "rejected" and approval.executed_at is None
    assert state_of(request) == "stopped" and Artifact.objects.count() == 0


def test_clear_edits_the_message_and_the_approval_stays_answerable(bot_api, owner, linked_approval):
    request, approval, row = linked_approval
    group_clear(group=request.group)
    edited_to(bot_api, row.message_id, "Rejected: the request was stopped.")
    assert post_update(Client(), press_update(f"ap:{approval.pk}:r")).status_code == 200
    bot_api.wait_for(
        "answerCallbackQuery", lambda c: c.params["text"].startswith("Already rejected")
    )


def test_delete_edits_the_message_and_a_late_press_decides_nothing(bot_api, linked_approval):
    """Deleting the group rejects the member's approval first, as clearing it does: the
    Telegram message says so, and a press after it finds it decided."""
    request, approval, row = linked_approval
    group_delete(group=request.group)
    edited_to(bot_api, row.message_id, "Rejected: the request was stopped.")
    assert post_update(Client(), press_update(f"ap:{approval.pk}:a")).status_code == 200
    bot_api.wait_for(
        "answerCallbackQuery", lambda c: c.params["text"].startswith("Already rejected")
    )
    worker_quiescent()
    assert Artifact.objects.count() == 0, "the action never ran"


def test_telegram_has_no_group_surface(bot_api, linked_approval):
    """The one place Telegram meets a group is a member's approval: from the linked chat, a
    mention, a group's name or a command addresses nothing — each is answered with the
    bot's help — and no turn, request or group is made."""
    request, approval, _row = linked_approval
    before = (Message.objects.count(), GroupRequest.objects.count(), Group.objects.count())
    said = ["@ledger, exclude that reimbursement", "Household finances: how much can I save?"]
    for text in [*said, "/groups"]:
        assert post_update(Client(), message_update(text)).status_code == 200
    replies = wait_for(
        lambda: [c for c in bot_api.calls_of("sendMessage") if c.params["text"] == HELP][2:] or None
    )
    assert replies
    worker_quiescent()
    after = (Message.objects.count(), GroupRequest.objects.count(), Group.objects.count())
    assert after == before
    assert state_of(request) == "awaiting_approval"
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_another_chat_cannot_decide_the_owners_approval(bot_api, stranger, linked_approval):
    request, approval, _row = linked_approval
    web = Client()
    # A chat linked to nobody, the owner's chat pressed by someone else, and a chat linked to
    # another owner: each is told "not yours", and nothing is decided.
    post_update(web, press_update(f"ap:{approval.pk}:a", chat_id=OTHER_CHAT))
    post_update(web, press_update(f"ap:{approval.pk}:a", chat_id=CHAT, from_id=OTHER_CHAT))
    code = link_code_create(owner=stranger).code
    post_update(web, message_update(f"/start {code}", chat_id=OTHER_CHAT))
    post_update(web, press_update(f"ap:{approval.pk}:a", chat_id=OTHER_CHAT))
    wait_for(lambda: len(answers(bot_api)) >= 3)
    assert all(text.startswith("Not yours") for text in answers(bot_api))
    worker_quiescent()
    approval.refresh_from_db()
    assert approval.status == "pending" and state_of(request) == "awaiting_approval"
    assert Artifact.objects.count() == 0
    # The owner still can.
    approval_decide(user=approval.owner, approval_id=approval.pk, decision="approve")
    wait_for(lambda: state_of(request) == "completed", timeout=30)
    assert Artifact.objects.count() == 1


def test_a_deactivated_owners_chat_decides_nothing(bot_api, linked_approval):
    request, approval, _row = linked_approval
    owner = approval.owner
    owner.is_active = False
    owner.save(update_fields=["is_active"])
    # Deactivation stops the owner's requests, rejecting what waited for them.
    approval.refresh_from_db()
    assert (approval.status, approval.reason) == ("rejected", "request stopped")
    assert state_of(request) == "stopped"
    # A press from their chat afterwards decides nothing: it is answered, and nothing changes.
    post_update(Client(), press_update(f"ap:{approval.pk}:a", chat_id=CHAT))
    wait_for(lambda: len(answers(bot_api)) >= 1)
    assert answers(bot_api)[-1].startswith("Not")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by_id) == ("rejected", None)
    assert state_of(request) == "stopped"


def test_a_pending_approval_follows_the_owner_to_a_newly_linked_chat(bot_api, linked_approval):
    _request, approval, _row = linked_approval
    code = link_code_create(owner=approval.owner).code
    post_update(Client(), message_update(f"/start {code}", chat_id=OTHER_CHAT))
    sent = bot_api.wait_for(
        "sendMessage",
        lambda c: int(c.params["chat_id"]) == OTHER_CHAT and "reply_markup" in c.params,
    )
    assert "Ledger wants to write Savings plan" in sent.params["text"]
    row = wait_for(
        lambda: TelegramApprovalMessage.objects.filter(
            approval=approval, chat_id=OTHER_CHAT, message_id__isnull=False
        ).first()
    )
    assert row is not None


def test_a_one_to_one_approval_decided_on_telegram_runs_once(celery_worker_thread, bot_api, linked):
    """An agent's tool call in its owner's 1:1 conversation waits on Telegram like a group's:
    approved by a press, it runs once, however often the press comes."""
    from tests.groups.helpers import answer_of, one_to_one, writer

    owner = linked
    request = one_to_one(owner, writer(owner), "Write the plan.")
    approval, sent, row = sent_approval(bot_api, request)
    # An agent's own room adds no "(in …)": the label names the agent.
    assert sent.params["text"].startswith("Ledger wants to write Plan\n"), sent.params["text"]
    web = Client()
    press = press_update(f"ap:{approval.pk}:a", message_id=row.message_id)
    assert post_update(web, press).status_code == 200
    wait_for(lambda: state_of(request) == "completed", timeout=30)
    assert post_update(web, press).status_code == 200
    approval.refresh_from_db()
    assert (approval.status, approval.surface) == ("approved", "telegram")
    assert answer_of(request).text == "Written."
    worker_quiescent()
    assert Artifact.objects.filter(title="Plan").count() == 1
