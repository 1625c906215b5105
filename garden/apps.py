from pathlib import Path

from django.apps import AppConfig
from django.conf import settings

# The folders the embedded broker (kombu's filesystem transport) reads and writes; it does not
# make them itself.
_BROKER_FOLDERS = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")


class GardenConfig(AppConfig):
    name = "garden"
    verbose_name = "garden"

    def ready(self) -> None:
        from celery.signals import (
            worker_process_shutdown,
            worker_ready,
            worker_shutdown,
            worker_shutting_down,
        )

        from . import (  # noqa: F401
            checks,
            db_release,
            heartbeat,
            metrics_dir,
            metrics_exposition,
            signals,
        )
        from .event_schema import register_event_type
        from .metrics import name_models_by, register_scrape_gauges
        from .payloads import MessageCreatedEvent
        from .pricing import known_model
        from .tools import charts, files, mcp, memory, web  # noqa: F401  (each registers its tools)

        register_event_type("message.created", MessageCreatedEvent)
        # First of the scrape gauges: the pool is read before the others take a connection.
        register_scrape_gauges(db_release.pool_gauges)
        # A model's metrics label is the name garden knows it by, or "other".
        name_models_by(known_model)
        make_var_folders()
        register_encrypted_fields()
        # Every worker process, however started, beats while it runs (garden/heartbeat.py).
        worker_ready.connect(heartbeat.on_worker_ready, weak=False, dispatch_uid="garden_beat")
        worker_shutdown.connect(
            heartbeat.on_worker_shutdown, weak=False, dispatch_uid="garden_beat_stop"
        )
        worker_shutting_down.connect(
            heartbeat.on_worker_shutting_down, weak=False, dispatch_uid="garden_shutting_down"
        )
        # A worker with GARDEN_METRICS_PORT serves its host's samples; a prefork child that
        # stops takes its live gauges out of the sum (garden/metrics_exposition.py,
        # garden/metrics_dir.py).
        worker_ready.connect(
            metrics_exposition.on_worker_ready, weak=False, dispatch_uid="garden_metrics"
        )
        worker_process_shutdown.connect(
            metrics_dir.process_stopped, weak=False, dispatch_uid="garden_metrics_stop"
        )


def register_encrypted_fields() -> None:
    """The fields of garden's models that hold encrypted secrets (``rotate_api_keys``)."""
    from .credentials import encrypted_field_register
    from .models import McpServer, ModelAccount

    encrypted_field_register(model=ModelAccount, field="api_key_encrypted", label="account")
    encrypted_field_register(model=McpServer, field="headers_encrypted", label="MCP server")


def make_var_folders() -> None:
    """Make var/ and, on the embedded broker, its folders. Importing the settings writes
    nothing, and every garden process (manage.py, ASGI, WSGI, a Celery worker, the test
    runner, a script) sets Django up before it opens the SQLite database or the broker, so this
    runs once per process, first."""
    Path(settings.VAR_DIR).mkdir(parents=True, exist_ok=True)
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
        for name in _BROKER_FOLDERS:
            Path(options[name]).mkdir(parents=True, exist_ok=True)
