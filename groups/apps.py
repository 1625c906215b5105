from django.apps import AppConfig


class GroupsConfig(AppConfig):
    name = "groups"
    verbose_name = "groups"

    def ready(self) -> None:
        from . import platform_tools, tools  # noqa: F401  (each registers its tools)
