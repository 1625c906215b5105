from django.apps import AppConfig


class OperatorMessagesConfig(AppConfig):
    name = "operator_messages"
    verbose_name = "operator messages"

    def ready(self) -> None:
        from garden.event_schema import register_event_type

        from .driver import TendFinishedEvent

        register_event_type("tend.finished", TendFinishedEvent)
