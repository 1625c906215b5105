from django.apps import AppConfig


class MissionsConfig(AppConfig):
    name = "missions"
    verbose_name = "missions"

    def ready(self) -> None:
        from . import receivers  # noqa: F401
