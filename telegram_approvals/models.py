"""An owner's linked Telegram chat, the one-time codes that link it, and the message each
pending approval was sent as."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class TelegramLink(models.Model):
    """The one private chat where an owner's approvals are sent and may be decided. One chat
    per owner, one owner per chat; the chat's user is kept so a press is checked against both."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="telegram_link"
    )
    chat_id = models.BigIntegerField(unique=True)
    telegram_user_id = models.BigIntegerField()
    username = models.CharField(max_length=64, blank=True)
    linked_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return (
            f"{self.owner} on Telegram ({'@' + self.username if self.username else self.chat_id})"
        )


class TelegramLinkCode(models.Model):
    """A code the dashboard showed once: good until ``expires_at``, for one use. Only its
    keyed hash is kept (``code_hash``), so a copy of the table links nothing."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    code_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"link code of {self.owner} (until {self.expires_at:%H:%M})"


class TelegramApprovalMessage(models.Model):
    """The Telegram message an approval was sent as, edited as the approval changes.

    The row is claimed before the message is sent (``message_id`` empty until Telegram
    answers), so two workers never send the same approval twice; ``text`` is what the
    message says now, so an edit is made only when the approval's state reads differently.
    """

    approval = models.OneToOneField(
        "groups.Approval", on_delete=models.CASCADE, related_name="telegram_message"
    )
    chat_id = models.BigIntegerField()
    message_id = models.BigIntegerField(null=True, blank=True)
    text = models.TextField(blank=True)
    claimed_at = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"approval {self.approval_id} as message {self.message_id} in {self.chat_id}"
