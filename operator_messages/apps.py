from django.apps import AppConfig


class OperatorMessagesConfig(AppConfig):
    name = "operator_messages"
    verbose_name = "operator messages"
