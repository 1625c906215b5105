"""Personal access tokens: how a person's scripts and CI reach the API without a browser."""

from django.conf import settings
from django.db import models

# What a token may do: read; write (post messages, decide approvals, change settings); manage
# (clear, delete, restore, archive a group: what cannot be taken back) — never by default.
SCOPES = ("read", "write", "manage")
DEFAULT_SCOPES = ["read", "write"]


def default_scopes() -> list[str]:
    return list(DEFAULT_SCOPES)


class AccessToken(models.Model):
    """A bearer token acting as its owner on the API. Only a SHA-256 of the token is kept
    (``token_hash``); the token itself is shown once, when it is made. ``prefix`` — the start
    of the token — tells tokens apart in a list and in logs without revealing them."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    scopes = models.JSONField(
        default=default_scopes,
        help_text="What it may do: read, write, manage (clear, delete, restore, archive).",
    )

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"
