"""The Bot API client: its calls pass the egress policy before any connection, the token is
never logged, and sending an approval is idempotent and safe to retry."""

from __future__ import annotations

import logging

import pytest
from telegram.error import BadRequest, NetworkError

from garden.models import Agent
from groups.models import Approval, GroupRequest
from groups.services.requests import request_create
from telegram_approvals.bot import BotApi, BotApiRefused
from telegram_approvals.models import TelegramApprovalMessage
from telegram_approvals.services import approval_message_sync
from tests.telegram.conftest import CHAT, TOKEN, WRITE

pytestmark = pytest.mark.django_db


def test_a_bot_api_url_the_policy_does_not_allow_is_refused_before_any_connection(
    bot_api, settings
):
    settings.GARDEN_EGRESS_ALLOW_TELEGRAM = []
    with pytest.raises(BotApiRefused) as refused:
        BotApi().send_message(chat_id=CHAT, text="hello")
    assert "127.0.0.1 is a loopback address" in str(refused.value)
    assert "GARDEN_EGRESS_ALLOW_TELEGRAM" in str(refused.value)
    assert TOKEN not in str(refused.value)
    assert bot_api.calls == []
    # Allowing loopback for model accounts does not allow it for Telegram.
    settings.GARDEN_EGRESS_ALLOW_PROVIDERS = ["127.0.0.1"]
    with pytest.raises(BotApiRefused):
        BotApi().get_me()
    assert bot_api.calls == []


def test_a_metadata_address_is_refused_even_by_name(bot_api, settings):
    settings.GARDEN_TELEGRAM_API_URL = "http://169.254.169.254"
    settings.GARDEN_EGRESS_ALLOW_TELEGRAM = []
    with pytest.raises(BotApiRefused, match="cloud metadata"):
        BotApi().get_me()


def test_the_token_is_never_logged(bot_api, caplog):
    caplog.set_level(logging.DEBUG)
    bot = BotApi()
    bot.get_me()
    bot.send_message(chat_id=CHAT, text="hello")
    assert any("<bot token>" in r.getMessage() for r in caplog.records)  # httpx's request line
    assert not any(TOKEN in r.getMessage() for r in caplog.records)
    assert not any(TOKEN.split(":")[1] in r.getMessage() for r in caplog.records)


def test_an_unreachable_bot_api_names_no_url(bot_api, settings):
    bot_api.close()
    with pytest.raises(NetworkError) as failed:
        BotApi().get_me()
    assert str(failed.value) == "Bot API unreachable (ConnectError)"


def _pending_approval(owner, group, call_id: str = "call-1") -> Approval:
    """A pending approval as a suspended request leaves it (no worker needed)."""
    request = request_create(group=group, text="Write down the savings plan.")
    GroupRequest.objects.filter(pk=request.pk).update(state=GroupRequest.State.AWAITING_APPROVAL)
    return Approval.objects.create(
        owner=owner,
        request=request,
        conversation=request.conversation,
        agent=Agent.objects.get(owner=owner, handle="ledger"),
        tool_call_id=call_id,
        action=WRITE,
    )


@pytest.fixture
def pending(linked, writing_group, owner):
    return _pending_approval(owner, writing_group)


def test_sending_is_idempotent_and_an_unchanged_approval_is_not_edited(bot_api, pending):
    assert approval_message_sync(approval_id=pending.pk) == "sent"
    assert approval_message_sync(approval_id=pending.pk) == "up_to_date"
    assert len(bot_api.calls_of("sendMessage")) == 1
    assert bot_api.calls_of("editMessageText") == []
    row = TelegramApprovalMessage.objects.get(approval=pending)
    assert row.chat_id == CHAT and row.message_id == 101
    assert row.text == bot_api.calls_of("sendMessage")[0].params["text"]


def test_a_failed_send_releases_its_claim_so_a_retry_sends_it(bot_api, pending):
    bot_api.fail("sendMessage", 502, "Bad Gateway")
    with pytest.raises(NetworkError):
        approval_message_sync(approval_id=pending.pk)
    assert not TelegramApprovalMessage.objects.exists()
    assert approval_message_sync(approval_id=pending.pk) == "sent"
    assert TelegramApprovalMessage.objects.get().message_id is not None


def test_an_edit_telegram_refuses_is_given_up_and_a_gone_chat_is_left_alone(
    bot_api, pending, owner
):
    approval_message_sync(approval_id=pending.pk)
    Approval.objects.filter(pk=pending.pk).update(status="rejected", reason="request stopped")
    bot_api.fail("editMessageText", 400, "Bad Request: message to edit not found")
    assert approval_message_sync(approval_id=pending.pk) == "edit_refused"
    # "Not modified" means it already says so.
    bot_api.fail("editMessageText", 400, "Bad Request: message is not modified")
    assert approval_message_sync(approval_id=pending.pk) == "edited"
    assert approval_message_sync(approval_id=pending.pk) == "up_to_date"
    with pytest.raises(BadRequest):
        bot_api.fail("editMessageText", 400, "Bad Request: chat not found")
        BotApi().edit_message_text(chat_id=CHAT, message_id=1, text="x")


def test_nothing_is_sent_to_an_owner_without_a_link_or_a_site_without_a_bot(
    bot_api, settings, writing_group, owner
):
    approval = _pending_approval(owner, writing_group)
    assert approval_message_sync(approval_id=approval.pk) == "not_linked"
    settings.GARDEN_TELEGRAM_BOT_TOKEN = ""
    assert approval_message_sync(approval_id=approval.pk) == "not_configured"
    assert bot_api.calls == []
