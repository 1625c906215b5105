"""Staff admin: each owner's notification channels and muted agents, read-only."""

from django.contrib import admin

from notifications.models import AgentMute, NotificationSettings


@admin.register(NotificationSettings)
class NotificationSettingsAdmin(admin.ModelAdmin):
    list_display = ("owner", "browser", "telegram", "updated_at")
    search_fields = ("owner__username",)
    readonly_fields = ("owner", "browser", "telegram", "updated_at")

    def has_add_permission(self, request) -> bool:  # written by the owner's settings alone
        return False


@admin.register(AgentMute)
class AgentMuteAdmin(admin.ModelAdmin):
    list_display = ("owner", "agent", "created_at")
    search_fields = ("owner__username", "agent__handle")
    readonly_fields = ("owner", "agent", "created_at")

    def has_add_permission(self, request) -> bool:  # written by the owner's settings alone
        return False
