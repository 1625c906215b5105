"""Point the bot's webhook at this site (deployments), or remove it (to poll instead)."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache
from django.core.management.base import BaseCommand, CommandError
from telegram.error import TelegramError

from telegram_approvals.bot import BotApi, TelegramNotConfigured


class Command(BaseCommand):
    help = (
        "Set the bot's webhook to URL (https://<site>/telegram/webhook) with "
        "GARDEN_TELEGRAM_WEBHOOK_SECRET as its secret token, or --delete it."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("url", nargs="?", help="The public HTTPS URL of /telegram/webhook.")
        parser.add_argument("--delete", action="store_true", help="Remove the webhook.")

    def handle(self, *args, url: str | None = None, delete: bool = False, **options) -> None:
        try:
            api = BotApi()
        except TelegramNotConfigured as exc:
            raise CommandError(f"{exc} See docs/telegram.md.") from exc
        try:
            if delete:
                api.delete_webhook()
                self.stdout.write("Webhook removed; `manage.py telegram_poll` can poll now.")
                return
            if not url:
                raise CommandError("Give the webhook's URL, or --delete.")
            if not url.startswith("https://"):
                raise CommandError("Telegram posts webhooks to https:// URLs only.")
            secret = settings.GARDEN_TELEGRAM_WEBHOOK_SECRET
            if not secret:
                raise CommandError(
                    "Set GARDEN_TELEGRAM_WEBHOOK_SECRET first (1-256 characters of A-Z, a-z, "
                    "0-9, _ and -): the webhook refuses updates without it."
                )
            api.set_webhook(url=url, secret_token=secret)
            me = api.get_me()
        except TelegramError as exc:
            raise CommandError(f"Telegram refused: {exc}") from exc
        cache.set("telegram-bot-username", me.username, timeout=3600)
        self.stdout.write(f"Webhook of @{me.username} set to {url}.")
