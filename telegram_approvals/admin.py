"""Staff admin: who linked which Telegram chat, and the messages approvals were sent as."""

from django.contrib import admin

from telegram_approvals.models import TelegramApprovalMessage, TelegramLink


@admin.register(TelegramLink)
class TelegramLinkAdmin(admin.ModelAdmin):
    list_display = ("owner", "username", "chat_id", "linked_at")
    search_fields = ("owner__username", "username")
    readonly_fields = ("owner", "chat_id", "telegram_user_id", "username", "linked_at")


@admin.register(TelegramApprovalMessage)
class TelegramApprovalMessageAdmin(admin.ModelAdmin):
    list_display = ("approval", "chat_id", "message_id", "updated_at")
    readonly_fields = ("approval", "chat_id", "message_id", "text", "claimed_at", "updated_at")
