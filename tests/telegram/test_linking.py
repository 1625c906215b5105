"""Linking an owner's Telegram chat: a one-time code from the dashboard, sent to the bot as
/start <code> through the webhook (secret header checked) or the poll command."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from telegram_approvals.models import TelegramLink, TelegramLinkCode
from telegram_approvals.services import (
    CHAT_TAKEN,
    INVALID_CODE,
    PRIVATE_ONLY,
    link_code_create,
    replies_deliver,
    update_handle,
)
from tests.telegram.botapi import BOT_USERNAME
from tests.telegram.conftest import (
    CHAT,
    OTHER_CHAT,
    SECRET,
    TOKEN,
    message_update,
    post_update,
)

pytestmark = pytest.mark.django_db


def _handle(update: dict) -> list[dict]:
    from telegram import Update

    return update_handle(update=Update.de_json(update, None))


def _said(replies: list[dict]) -> list[str]:
    return [r["text"] for r in replies]


def test_the_dashboard_hands_out_a_code_that_links_the_chat_once(bot_api, api, owner):
    made = api.post("/api/telegram/link-code")
    assert made.status_code == 201, made.content
    code = made.json()["code"]
    assert made.json()["command"] == f"/start {code}"
    assert made.json()["bot_username"] == BOT_USERNAME  # asked of getMe once
    assert made.json()["link_url"] == f"https://t.me/{BOT_USERNAME}?start={code}"
    # Only a keyed hash of the code is stored.
    stored = TelegramLinkCode.objects.get(owner=owner)
    assert code not in stored.code_hash and stored.used_at is None

    said = _said(_handle(message_update(f"/start {code}")))
    assert said[0].startswith("Linked")
    link = TelegramLink.objects.get(owner=owner)
    assert (link.chat_id, link.telegram_user_id, link.username) == (CHAT, CHAT, "sam")
    assert api.get("/api/telegram/link").json()["linked"] is True

    # Single use: the same code again, from another chat, links nothing.
    assert _said(_handle(message_update(f"/start {code}", chat_id=OTHER_CHAT))) == [INVALID_CODE]
    assert TelegramLink.objects.get(owner=owner).chat_id == CHAT


def test_an_expired_or_unknown_code_links_nothing(bot_api, owner):
    code = link_code_create(owner=owner).code
    TelegramLinkCode.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert _said(_handle(message_update(f"/start {code}"))) == [INVALID_CODE]
    assert _said(_handle(message_update("/start NOTACODE22"))) == [INVALID_CODE]
    assert not TelegramLink.objects.exists()


def test_a_new_code_replaces_the_last_and_group_chats_cannot_link(bot_api, owner):
    first = link_code_create(owner=owner).code
    second = link_code_create(owner=owner).code
    assert _said(_handle(message_update(f"/start {first}"))) == [INVALID_CODE]
    group_chat = message_update(f"/start {second}", chat_id=-100123, chat_type="supergroup")
    assert _said(_handle(group_chat)) == [PRIVATE_ONLY]
    assert _said(_handle(message_update(f"/start {second}")))[0].startswith("Linked")


def test_one_chat_per_owner_and_one_owner_per_chat(bot_api, owner, stranger):
    _handle(message_update(f"/start {link_code_create(owner=owner).code}"))
    # The stranger's code sent from the owner's chat is refused, and stays unspent.
    code = link_code_create(owner=stranger).code
    assert _said(_handle(message_update(f"/start {code}"))) == [CHAT_TAKEN]
    assert _said(_handle(message_update(f"/start {code}", chat_id=OTHER_CHAT)))[0].startswith(
        "Linked"
    )
    # Linking another chat moves the owner's link there.
    _handle(message_update(f"/start {link_code_create(owner=owner).code}", chat_id=CHAT + 7))
    assert TelegramLink.objects.get(owner=owner).chat_id == CHAT + 7
    assert TelegramLink.objects.count() == 2


def test_unlink_from_the_dashboard(bot_api, api, owner):
    _handle(message_update(f"/start {link_code_create(owner=owner).code}"))
    assert api.delete("/api/telegram/link").status_code == 204
    assert not TelegramLink.objects.exists()
    assert api.get("/api/telegram/link").json()["linked"] is False


def test_an_access_token_cannot_link_a_chat(bot_api, owner):
    from rest_framework.test import APIClient

    from garden.services.tokens import token_create

    secret = token_create(owner=owner, name="ci", expires_in_days=None).secret
    client = APIClient()
    refused = client.post("/api/telegram/link-code", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert refused.status_code in (401, 403)
    assert not TelegramLinkCode.objects.exists()


def test_the_webhook_refuses_a_wrong_or_missing_secret_and_processes_nothing(bot_api, owner):
    code = link_code_create(owner=owner).code
    client = Client()
    for secret in (None, "wrong", SECRET + "x", ""):
        response = post_update(client, message_update(f"/start {code}"), secret=secret)
        assert response.status_code == 403
    assert not TelegramLink.objects.exists()
    assert TelegramLinkCode.objects.get().used_at is None
    assert bot_api.calls == []
    # The right secret is handled, and answered 200.
    assert post_update(client, message_update(f"/start {code}")).status_code == 200
    assert TelegramLink.objects.filter(owner=owner, chat_id=CHAT).exists()


def test_the_webhook_is_off_without_a_secret_or_a_token(bot_api, settings, owner):
    client = Client()
    settings.GARDEN_TELEGRAM_WEBHOOK_SECRET = ""
    assert post_update(client, message_update("/start X"), secret="").status_code == 403
    settings.GARDEN_TELEGRAM_BOT_TOKEN = ""
    assert post_update(client, message_update("/start X")).status_code == 404
    assert client.get("/telegram/webhook").status_code == 405


def test_a_body_that_is_not_an_update_is_refused(bot_api):
    response = Client().post(
        "/telegram/webhook",
        data=b"[1, 2]",
        content_type="application/json",
        HTTP_X_TELEGRAM_BOT_API_SECRET_TOKEN=SECRET,
    )
    assert response.status_code == 400


def test_an_update_delivered_twice_is_answered_once(bot_api, owner):
    update = message_update(f"/start {link_code_create(owner=owner).code}")
    assert _said(_handle(update))[0].startswith("Linked")
    assert _handle(update) == []


def test_replies_are_sent_to_the_bot_api(bot_api):
    made = replies_deliver(
        replies=[
            {"method": "sendMessage", "chat_id": CHAT, "text": "hello"},
            {"method": "answerCallbackQuery", "callback_query_id": "q1", "text": "ok"},
        ]
    )
    assert made == 2
    sent = bot_api.calls_of("sendMessage")[0]
    assert sent.token == TOKEN and sent.params == {"chat_id": CHAT, "text": "hello"}
    assert bot_api.calls_of("answerCallbackQuery")[0].params == {
        "callback_query_id": "q1",
        "text": "ok",
    }


def test_the_poll_command_links_a_chat_from_get_updates(bot_api, owner):
    code = link_code_create(owner=owner).code
    bot_api.queue_update(message_update(f"/start {code}"))
    call_command("telegram_poll", "--once", "--timeout", "0")
    assert TelegramLink.objects.filter(owner=owner, chat_id=CHAT).exists()
    answer = bot_api.wait_for("sendMessage", timeout=5)
    assert answer.params["chat_id"] == CHAT and answer.params["text"].startswith("Linked")


def test_the_webhook_command_sets_the_secret_token(bot_api):
    call_command("telegram_webhook", "https://garden.example/telegram/webhook")
    assert bot_api.webhook["url"] == "https://garden.example/telegram/webhook"
    assert bot_api.webhook["secret_token"] == SECRET
    assert bot_api.webhook["allowed_updates"] == ["message", "callback_query"]
    call_command("telegram_webhook", "--delete")
    assert bot_api.webhook == {}


def test_the_link_page(bot_api, settings, owner):
    client = Client()
    client.force_login(owner)
    page = client.get("/dashboard/telegram/")
    assert page.status_code == 200
    assert b"Get a code" in page.content and b"No Telegram chat is linked" in page.content
    settings.GARDEN_TELEGRAM_BOT_TOKEN = ""
    page = client.get("/dashboard/telegram/")
    assert b"Telegram is not configured on this site" in page.content
    assert b"Get a code" not in page.content
    assert bot_api.calls == []  # a page's GET asks Telegram nothing
