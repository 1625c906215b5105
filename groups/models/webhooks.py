"""An owner's webhook endpoints, the deliveries an ending request or a waiting approval creates,
and every try to send one."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from groups.models.groups import Group
from groups.models.requests import GroupRequest


class WebhookEndpoint(models.Model):
    """Where an owner's requests and approvals are announced: an HTTPS (or allowed) URL that
    receives signed Standard Webhooks deliveries (groups/webhooks.py).

    ``group`` null means every group of the owner; ``named_only`` endpoints receive only the
    requests whose message named them. The signing secret is stored encrypted and shown once.
    """

    class Event(models.TextChoices):
        REQUEST_COMPLETED = "request.completed", "Request completed"
        REQUEST_STOPPED = "request.stopped", "Request stopped"
        REQUEST_FAILED = "request.failed", "Request failed"
        APPROVAL_PENDING = "approval.pending", "Approval pending"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook_endpoints"
    )
    group = models.ForeignKey(
        Group, on_delete=models.CASCADE, null=True, blank=True, related_name="webhook_endpoints"
    )
    named_only = models.BooleanField(default=False)
    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=200, blank=True)
    events = models.JSONField(default=list)
    secret_encrypted = models.TextField()
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=200, blank=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    # Deliveries in a row that gave up; one that arrives sets it back to 0.
    consecutive_failures = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"Webhook {self.pk} → {self.url}"


class WebhookDelivery(models.Model):
    """One event for one endpoint: the same ``event_id`` (the ``webhook-id`` header) on every
    attempt, so a receiver can drop duplicates. Its attempts are WebhookAttempt rows."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Gave up"

    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    event_id = models.CharField(max_length=64)
    event_type = models.CharField(max_length=40)
    payload = models.JSONField()
    request = models.ForeignKey(
        GroupRequest, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["endpoint", "event_id"], name="one_delivery_per_event_per_endpoint"
            ),
        ]
        indexes = [
            models.Index(fields=["state", "next_attempt_at"], name="webhook_delivery_due"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.event_id} → endpoint {self.endpoint_id} ({self.state})"


class WebhookAttempt(models.Model):
    """One try at sending a delivery: what came back, or why nothing did."""

    delivery = models.ForeignKey(
        WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log"
    )
    number = models.PositiveSmallIntegerField()
    at = models.DateTimeField(auto_now_add=True)
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"Attempt {self.number} of delivery {self.delivery_id}"
