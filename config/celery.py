"""The Celery app; its configuration comes from Django settings (CELERY_* names)."""

import os

from celery import Celery
from celery.signals import after_setup_logger, beat_init, worker_init
from django.conf import settings

from garden import telemetry
from garden.logs import RepeatFilter

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("garden")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _trace_worker(**_: object) -> None:
    """Traces from this worker when OTEL_* asks for them (garden/telemetry.py). In the worker's
    main process, before its pool starts: the threads pool shares it, and a forked pool's
    children inherit it (the SDK restarts its export thread after a fork)."""
    telemetry.setup_tracing(telemetry.SERVICE_WORKER)


@beat_init.connect
def _trace_beat(**_: object) -> None:
    telemetry.setup_tracing(telemetry.SERVICE_BEAT)


@after_setup_logger.connect
def _bound_repeats(logger, **_: object) -> None:
    """Celery replaces the root logger's handlers with its own: they bound repeated records
    as settings.LOGGING's console handler does (garden/logs.py)."""
    options = {k: v for k, v in settings.LOGGING["filters"]["repeats"].items() if k != "()"}
    for handler in logger.handlers:
        handler.addFilter(RepeatFilter(**options))
