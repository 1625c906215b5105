"""Goals and the runs that work towards them."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Goal(models.Model):
    """What a run works towards. ``origin`` links it to the conversation that asked for it."""

    class Kind(models.TextChoices):
        CONVERSE = "converse", "Converse"
        TEND = "tend", "Tend"
        DURABLE = "durable", "Durable"
        MISSION = "mission", "Mission"

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        CONCLUDED = "concluded", "Concluded"
        FAILED = "failed", "Failed"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="goals",
        help_text="Empty for system-owned goals (the gardener's).",
    )
    kind = models.CharField(max_length=10, choices=Kind.choices)
    title = models.CharField(max_length=200, blank=True)
    origin = models.JSONField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    created_at = models.DateTimeField(auto_now_add=True)
    concluded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.kind} goal {self.pk}"


class Run(models.Model):
    """One execution of a goal, with a directory under the runtime root."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    run_id = models.CharField(max_length=64, unique=True)
    goal = models.ForeignKey(Goal, on_delete=models.CASCADE, related_name="runs")
    actor = models.CharField(max_length=60, help_text="'gardener', or 'agent:<id>'.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    directory = models.CharField(max_length=500, blank=True)
    outcome = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.run_id
