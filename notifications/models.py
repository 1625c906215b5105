"""Where an owner's agents' replies notify them (their open dashboard pages, their linked
Telegram chat) and which agents are muted. Approvals are not here: they always notify."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class NotificationSettings(models.Model):
    """An owner's channels for their agents' replies. No row reads as the defaults: the
    browser on (it shows nothing until the person allows it there), Telegram off."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_settings"
    )
    browser = models.BooleanField(default=True)
    telegram = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "notification settings"

    def __str__(self) -> str:
        return f"notifications of {self.owner}"


class AgentMute(models.Model):
    """One of the owner's agents whose replies notify nothing (its approvals still do)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_mutes"
    )
    agent = models.ForeignKey("garden.Agent", on_delete=models.CASCADE, related_name="mutes")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "agent"], name="one_mute_per_agent"),
        ]

    def __str__(self) -> str:
        return f"{self.agent} muted"
