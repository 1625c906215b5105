"""Fixtures of the Telegram surface: a fake Bot API server on 127.0.0.1 that the egress policy
is told to allow (as an operator would a self-hosted Bot API), the site's bot settings, a
linked chat, and the updates Telegram would post."""

from __future__ import annotations

import itertools
import random
import time
from typing import Any

import pytest

# The group of the approvals tests: Concierge asks Ledger to write the plan, and Ledger's
# file.write needs approval.
from tests.groups.conftest import (  # noqa: F401  (WRITE, a fixture)
    WRITE,
    group_factory,
    writing_group,
)
from tests.telegram.botapi import FakeBotApi

TOKEN = "123456789:AAtest-token-never-logged_0123456789"
SECRET = "webhook-secret_0123"
CHAT = 5550001  # a private chat's id is its person's user id
OTHER_CHAT = 5550002


# Update ids differ between runs too: handled ones are remembered in the (possibly shared) cache.
_update_ids = itertools.count(random.randrange(1, 2**40))


@pytest.fixture
def bot_api(settings):
    server = FakeBotApi(TOKEN)
    settings.GARDEN_TELEGRAM_BOT_TOKEN = TOKEN
    settings.GARDEN_TELEGRAM_API_URL = server.url
    settings.GARDEN_TELEGRAM_WEBHOOK_SECRET = SECRET
    settings.GARDEN_TELEGRAM_BOT_USERNAME = ""
    settings.GARDEN_TELEGRAM_TIMEOUT = 5.0
    # The fake Bot API listens on loopback: allowed for Telegram only, as an operator would.
    settings.GARDEN_EGRESS_ALLOW_TELEGRAM = ["127.0.0.1"]
    yield server
    server.close()


def message_update(text: str, *, chat_id: int = CHAT, chat_type: str = "private") -> dict:
    return {
        "update_id": next(_update_ids),
        "message": {
            "message_id": random.randrange(1, 10**6),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": chat_type, "first_name": "Sam"},
            "from": {"id": chat_id, "is_bot": False, "first_name": "Sam", "username": "sam"},
            "text": text,
        },
    }


def press_update(
    data: str, *, chat_id: int = CHAT, from_id: int | None = None, message_id: int = 101
) -> dict:
    """A press of an inline button with callback ``data`` on message ``message_id``."""
    return {
        "update_id": next(_update_ids),
        "callback_query": {
            "id": str(random.randrange(10**12)),
            "chat_instance": "ci-1",
            "data": data,
            "from": {"id": from_id or chat_id, "is_bot": False, "first_name": "Sam"},
            "message": {
                "message_id": message_id,
                "date": int(time.time()),
                "chat": {"id": chat_id, "type": "private"},
                "text": "an approval",
            },
        },
    }


def post_update(client, update: dict[str, Any], *, secret: str | None = SECRET):
    headers = {} if secret is None else {"HTTP_X_TELEGRAM_BOT_API_SECRET_TOKEN": secret}
    return client.post("/telegram/webhook", data=update, content_type="application/json", **headers)


@pytest.fixture
def linked(bot_api, owner):
    """``owner``'s chat CHAT, linked with a code as the dashboard would hand out."""
    from telegram_approvals.services import link_code_create, link_redeem

    code = link_code_create(owner=owner).code
    said = link_redeem(code=code, chat_id=CHAT, chat_type="private", telegram_user_id=CHAT)
    assert said.startswith("Linked")
    return owner
