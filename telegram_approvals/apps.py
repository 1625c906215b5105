from django.apps import AppConfig


class TelegramApprovalsConfig(AppConfig):
    name = "telegram_approvals"
    verbose_name = "Telegram approvals"

    def ready(self) -> None:
        from . import bot, receivers  # noqa: F401  (receivers connect; bot redacts its token)

        bot.redact_token_in_logs()
