"""Long-poll the Bot API for updates: Telegram for development, where no public HTTPS URL can
take a webhook. Each update is handled as the webhook would handle it, and answered from here."""

from __future__ import annotations

import time

from django.core.cache import cache
from django.core.management.base import BaseCommand, CommandError
from telegram.error import Conflict, InvalidToken, NetworkError, TelegramError

from telegram_approvals.bot import POLL_SECONDS, BotApi, TelegramNotConfigured
from telegram_approvals.services import replies_deliver, update_handle


class Command(BaseCommand):
    help = "Long-poll Telegram's getUpdates and handle each update (development)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--once", action="store_true", help="Handle one batch of updates, then stop."
        )
        parser.add_argument(
            "--timeout", type=int, default=POLL_SECONDS, help="Seconds each poll waits."
        )

    def handle(self, *args, **options) -> None:
        try:
            api = BotApi()
            me = api.get_me()
        except TelegramNotConfigured as exc:
            raise CommandError(f"{exc} See docs/telegram.md.") from exc
        except InvalidToken as exc:
            raise CommandError("Telegram refused GARDEN_TELEGRAM_BOT_TOKEN.") from exc
        except TelegramError as exc:
            raise CommandError(f"Telegram cannot be reached: {exc}") from exc
        cache.set("telegram-bot-username", me.username, timeout=3600)
        self.stdout.write(f"Polling Telegram as @{me.username} (Ctrl+C to stop).")
        offset: int | None = None
        while True:
            try:
                updates = api.get_updates(offset=offset, timeout=options["timeout"])
            except Conflict as exc:
                raise CommandError(
                    "A webhook is set for this bot, so Telegram does not answer getUpdates. "
                    "Remove it with `manage.py telegram_webhook --delete` to poll."
                ) from exc
            except NetworkError as exc:
                self.stderr.write(f"Telegram poll failed ({exc}); trying again in 5 s.")
                time.sleep(5)
                continue
            for update in updates:
                offset = update.update_id + 1
                replies_deliver(replies=update_handle(update=update), api=api)
            if options["once"]:
                return
