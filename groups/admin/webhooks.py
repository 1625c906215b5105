"""The webhooks admin, read-only: owners' endpoints (never their signing secret) and the
deliveries sent to them, each with its tries."""

from __future__ import annotations

from django.contrib import admin

from garden.admin_base import ReadOnlyAdmin
from groups.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint


class WebhookAttemptInline(admin.TabularInline):
    model = WebhookAttempt
    fields = ["number", "at", "status", "error", "duration_ms"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ReadOnlyAdmin):
    """Owners' endpoints; the signing secret is never shown, even encrypted."""

    list_display = [
        "id",
        "owner",
        "group",
        "url",
        "events",
        "named_only",
        "enabled",
        "consecutive_failures",
        "disabled_reason",
        "created_at",
    ]
    list_filter = ["enabled", "named_only"]
    search_fields = ["url", "owner__username", "description"]
    list_select_related = ["owner", "group"]
    exclude = ["secret_encrypted"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "endpoint",
        "event_type",
        "event_id",
        "state",
        "attempts",
        "last_status",
        "next_attempt_at",
        "created_at",
        "finished_at",
    ]
    list_filter = ["state", "event_type"]
    search_fields = ["event_id"]
    list_select_related = ["endpoint"]
    inlines = [WebhookAttemptInline]
