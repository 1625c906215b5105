"""Missions: scheduled work that targets an agent or a group, and the record of each due run.

A mission's schedule is a django-celery-beat PeriodicTask (task ``missions.run_mission``); each
due run is a durable ``mission`` goal with its own Run, going through the same path as an owner
message: the group's request queue and budget, or the agent's 1:1 conversation.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Mission(models.Model):
    class TargetType(models.TextChoices):
        AGENT = "agent", "Agent"
        GROUP = "group", "Group"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="missions"
    )
    name = models.CharField(max_length=100)
    prompt = models.TextField(help_text="Posted on the owner's behalf at every due run.")
    target_type = models.CharField(max_length=10, choices=TargetType.choices)
    # CASCADE: a group is removed for good only after its minute of undo, and an agent row
    # is never deleted by garden itself; a mission cannot outlive what it targets.
    target_agent = models.ForeignKey(
        "garden.Agent", on_delete=models.CASCADE, null=True, blank=True, related_name="missions"
    )
    target_group = models.ForeignKey(
        "groups.Group", on_delete=models.CASCADE, null=True, blank=True, related_name="missions"
    )
    periodic_task = models.OneToOneField(
        "django_celery_beat.PeriodicTask",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="mission",
        help_text="The beat entry that makes the mission due; its interval or crontab is the "
        "schedule.",
    )
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=200, blank=True)
    origin_conversation = models.ForeignKey(
        "garden.Conversation",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Where the owner asked for the mission; its notes go there.",
    )
    conversation = models.ForeignKey(
        "garden.Conversation",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Agent missions: the 1:1 conversation every run reuses.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(target_type="agent", target_agent__isnull=False, target_group__isnull=True)
                    | Q(target_type="group", target_group__isnull=False, target_agent__isnull=True)
                ),
                name="mission_target_matches_type",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def target(self):
        return self.target_agent if self.target_type == self.TargetType.AGENT else self.target_group


class MissionRun(models.Model):
    """One due run of a mission: started (active → concluded | failed) or skipped, never lost."""

    class State(models.TextChoices):
        ACTIVE = "active", "Active"
        CONCLUDED = "concluded", "Concluded"
        FAILED = "failed", "Failed"
        SKIPPED = "skipped", "Skipped"

    class Trigger(models.TextChoices):
        SCHEDULE = "schedule", "Schedule"
        MANUAL = "manual", "Run now"

    class Report(models.TextChoices):
        """The recently_concluded note the gardener leaves when the run ends."""

        NONE = "", "—"
        SENDING = "sending", "Sending"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"

    mission = models.ForeignKey(Mission, on_delete=models.CASCADE, related_name="runs")
    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.SCHEDULE)
    task_id = models.CharField(
        max_length=64,
        blank=True,
        help_text="The Celery task id of the due run; a redelivered task finds its run here.",
    )
    state = models.CharField(max_length=10, choices=State.choices)
    goal = models.ForeignKey(
        "garden.Goal", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    run = models.ForeignKey(
        "garden.Run", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    group_request = models.ForeignKey(
        "groups.GroupRequest",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="mission_runs",
    )
    conversation = models.ForeignKey(
        "garden.Conversation", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    owner_message = models.ForeignKey(
        "garden.Message",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The turn posted on the owner's behalf (agent missions and group missions).",
    )
    outcome_code = models.CharField(max_length=40, blank=True)
    outcome = models.TextField(blank=True)
    skipped_reason = models.CharField(max_length=300, blank=True)
    report_state = models.CharField(max_length=10, choices=Report.choices, blank=True, default="")
    report = models.JSONField(
        default=dict,
        blank=True,
        help_text="The operator-message record, or the code of the refusal.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["mission"],
                condition=Q(state="active"),
                name="mission_one_active_run",
            ),
            models.UniqueConstraint(
                fields=["task_id"],
                condition=~Q(task_id=""),
                name="mission_run_task_id_unique",
            ),
            models.CheckConstraint(
                condition=~Q(state="skipped") | ~Q(skipped_reason=""),
                name="mission_run_skip_has_reason",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.mission} run {self.pk} ({self.state})"

    @property
    def is_finished(self) -> bool:
        return self.state != self.State.ACTIVE
