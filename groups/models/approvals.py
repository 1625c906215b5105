"""A member's tool action waiting for a person's decision."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from groups.models.groups import Group
from groups.models.requests import GroupRequest


class Approval(models.Model):
    """A member's pending tool action, waiting for a person's decision. Its table is still
    ``garden_approval``, where it lived before it moved to this app."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="approvals"
    )
    # Both outlive the history they belong to (SET_NULL): cleared history takes its messages
    # and requests, but a decision that arrives late still finds the approval decided.
    request = models.ForeignKey(
        GroupRequest,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="approvals",
    )
    conversation = models.ForeignKey(
        "garden.Conversation",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="approvals",
    )
    # The group it was asked in, kept when a clear detaches it from its thread and request, so
    # the group's removal for good takes it (and its Telegram message) with it.
    group = models.ForeignKey(
        Group,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="approvals",
    )
    agent = models.ForeignKey("garden.Agent", on_delete=models.PROTECT, related_name="approvals")
    tool_call_id = models.CharField(max_length=100)
    action = models.JSONField(help_text="The exact tool call: {name, arguments}.")
    approved_arguments = models.JSONField(
        null=True,
        blank=True,
        help_text="The arguments the person approved it with, when they changed the requested "
        "ones (the action that runs); null when it runs as requested.",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    surface = models.CharField(max_length=20, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    reason = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    executed_at = models.DateTimeField(null=True, blank=True)
    # When an approved action that found no free tool slot looks again (its message is sent):
    # the sweep leaves it to that look until it is long overdue.
    next_try_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "garden_approval"
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "tool_call_id"], name="approval_one_per_tool_call"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action.get('name', '?')} by {self.agent} ({self.status})"

    @property
    def arguments_to_run(self) -> dict:
        """The arguments the action runs with: the approved ones when changed, else the
        requested ones."""
        if self.approved_arguments is not None:
            return self.approved_arguments
        return (self.action or {}).get("arguments") or {}
