"""The Celery app; its configuration comes from Django settings (CELERY_* names)."""

import os

from celery import Celery
from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    beat_init,
    before_task_publish,
    celeryd_init,
    task_postrun,
    task_prerun,
    worker_init,
)
from django.conf import settings

from garden import log_format, request_ids, telemetry
from garden.logs import RepeatFilter

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("garden")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@celeryd_init.connect
def _worker_role(**_: object) -> None:
    """A worker's lines say so from its first (the checks before its pool starts)."""
    log_format.set_role(log_format.WORKER)


@worker_init.connect
def _trace_worker(**_: object) -> None:
    """Traces from this worker when OTEL_* asks for them (garden/telemetry.py). In the worker's
    main process, before its pool starts: the threads pool shares it, and a forked pool's
    children inherit it (the SDK restarts its export thread after a fork)."""
    telemetry.setup_tracing(telemetry.SERVICE_WORKER)


@beat_init.connect
def _trace_beat(**_: object) -> None:
    log_format.set_role(log_format.BEAT)
    telemetry.setup_tracing(telemetry.SERVICE_BEAT)


@after_setup_logger.connect
@after_setup_task_logger.connect
def _bound_repeats(logger, **_: object) -> None:
    """Celery replaces the root logger's handlers with its own, and gives its task logger one:
    they bound repeated records, carry the context fields and write the lines
    GARDEN_LOG_FORMAT says, as settings.LOGGING's console handler does (garden/logs.py,
    garden/log_format.py)."""
    options = {k: v for k, v in settings.LOGGING["filters"]["repeats"].items() if k != "()"}
    for handler in logger.handlers:
        handler.addFilter(RepeatFilter(**options))
        handler.addFilter(log_format.ContextFilter())
        handler.setFormatter(log_format.formatter(settings.GARDEN_LOG_FORMAT))


@before_task_publish.connect
def _carry_request_id(headers=None, **_: object) -> None:
    """A task sent while a request is served carries its id (garden/request_ids.py)."""
    request_ids.task_published(headers)


@task_prerun.connect
def _restore_request_id(task_id, task, **_: object) -> None:
    request_ids.task_started(task, task_id)


@task_postrun.connect
def _forget_request_id(**_: object) -> None:
    request_ids.task_ended()
