"""Reads of the Telegram surface: an owner's link, and the bot's name for the link page."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache

from telegram_approvals.bot import BotApi, configured
from telegram_approvals.models import TelegramLink

log = logging.getLogger(__name__)


def link_get(*, owner: AbstractBaseUser) -> TelegramLink | None:
    return TelegramLink.objects.filter(owner=owner).first()


def bot_username(*, ask: bool = False) -> str:
    """The bot's @name: GARDEN_TELEGRAM_BOT_USERNAME, else getMe's answer, kept an hour.
    Only with ``ask`` is Telegram asked (a page's GET makes no outbound call); "" when the
    name is not known (the page then says "the bot")."""
    if not configured():
        return ""
    if settings.GARDEN_TELEGRAM_BOT_USERNAME:
        return settings.GARDEN_TELEGRAM_BOT_USERNAME.lstrip("@")
    name = cache.get("telegram-bot-username")
    if name is None and not ask:
        return ""
    if name is None:
        try:
            name = BotApi().get_me().username
        except Exception as exc:  # the page still works without the name
            log.warning("Telegram getMe failed: %s", exc)
            # Not asked again for a minute: a page must not wait on an unreachable Bot API
            # once per request.
            cache.set("telegram-bot-username", "", timeout=60)
            return ""
        cache.set("telegram-bot-username", name, timeout=3600)
    return name
