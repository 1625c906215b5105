from django.db import models


class BeatLease(models.Model):
    """The one row that says which Celery beat may send the schedule: the beat named by
    ``holder`` until ``expires_at``; another takes it once it lapses (garden/beat.py).
    ``ticked_at`` is the holder's last renewal, the beat's liveness."""

    name = models.CharField(max_length=64, unique=True)
    holder = models.CharField(max_length=255, blank=True)
    expires_at = models.DateTimeField()
    ticked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name}: {self.holder or 'nobody'}"
