from django.db import models


class WorkerBeat(models.Model):
    """A Celery worker process that is, or was lately, alive: it writes its beat every
    GARDEN_WORKER_BEAT_SECONDS and removes its row when it stops warm. A row whose beat is
    older than GARDEN_WORKER_STALE_SECONDS is a worker that died."""

    hostname = models.CharField(max_length=255, unique=True)
    pid = models.PositiveIntegerField()
    concurrency = models.PositiveIntegerField(default=0)
    embedded = models.BooleanField(
        default=False, help_text="Runs inside the web process (the embedded default)."
    )
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["hostname"]

    def __str__(self) -> str:
        return self.hostname
