"""The MCP servers an owner adds: where they are, the secret headers they need (encrypted,
write-only) and the tools they listed when last added or refreshed."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class McpServer(models.Model):
    """A remote MCP server (Streamable HTTP) of one owner. Its tools reach an agent as
    ``mcp.<name>.<tool>`` once the owner enables them on it."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_servers"
    )
    name = models.CharField(max_length=20, help_text="Lower-case letters, digits and dashes.")
    url = models.URLField(max_length=500)
    headers_encrypted = models.TextField(
        blank=True,
        editable=False,
        help_text="The headers sent with every request (a bearer token among them), as "
        "Fernet-encrypted JSON; never returned.",
    )
    header_names = models.JSONField(
        default=list, blank=True, editable=False, help_text="The names of the stored headers."
    )
    tools = models.JSONField(
        default=list,
        blank=True,
        editable=False,
        help_text="What tools/list said when the server was added or last refreshed: name, "
        "description, input_schema, annotations.",
    )
    refreshed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"], name="mcp_server_name_unique_per_owner"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.url})"
