from django.apps import AppConfig


class GardenConfig(AppConfig):
    name = "garden"
    verbose_name = "garden"

    def ready(self) -> None:
        from . import checks, signals  # noqa: F401
        from .tools import files, memory, web  # noqa: F401  (each registers its tools)
