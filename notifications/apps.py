from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from garden.event_schema import register_event_type

        from . import receivers  # noqa: F401  (receivers connect)
        from .payloads import ReplyNotificationEvent

        register_event_type("notification.reply", ReplyNotificationEvent)
