"""Model accounts (how an agent reaches its model) and the agents people own."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class ModelAccount(models.Model):
    """How an agent reaches its model, and where its key comes from (garden/credentials.py):
    one of the operator's named ``credential``s, or a key the owner pasted, kept only
    encrypted (``api_key_encrypted``) and never returned.
    """

    class Provider(models.TextChoices):
        SCRIPTED = "scripted", "Scripted (offline)"
        OPENAI = "openai", "OpenAI-compatible"
        ANTHROPIC = "anthropic", "Anthropic"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="model_accounts"
    )
    name = models.CharField(max_length=100)
    provider = models.CharField(max_length=20, choices=Provider.choices)
    model = models.CharField(max_length=200, blank=True)
    base_url = models.URLField(max_length=500, blank=True)
    credential = models.CharField(
        max_length=100, blank=True, help_text="One of the operator's named credentials."
    )
    api_key_encrypted = models.TextField(
        blank=True, editable=False, help_text="A key the owner pasted, Fernet-encrypted."
    )
    legacy_secret_ref = models.CharField(
        max_length=200,
        blank=True,
        editable=False,
        help_text="An env:NAME reference from before operator credentials; it works only "
        "while one of the operator's credentials reads that variable for this owner.",
    )
    timeout_seconds = models.FloatField(default=60.0)
    options = models.JSONField(
        default=dict, blank=True, help_text="Adapter options; for scripted, the script."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.provider})"


class Agent(models.Model):
    """An agent a person owns. Groups reuse agents; membership grants nothing new."""

    class Builtin(models.TextChoices):
        NONE = "", "—"
        MAKER = "maker", "Agent Father (maker)"
        CONCIERGE = "concierge", "Concierge"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agents"
    )
    handle = models.SlugField(max_length=40, help_text="Used for @mentions; unique per owner.")
    name = models.CharField(max_length=100)
    colour = models.CharField(max_length=7, default="#5b8def")
    instructions = models.TextField(blank=True)
    model_account = models.ForeignKey(
        ModelAccount, on_delete=models.PROTECT, null=True, blank=True, related_name="agents"
    )
    enabled_tools = models.JSONField(default=list, blank=True)
    approval_tools = models.JSONField(
        default=list, blank=True, help_text="Tools whose every call waits for a person's approval."
    )
    tool_approvals = models.JSONField(
        default=dict,
        blank=True,
        help_text="The approval policy of each enabled MCP tool: always, never, or "
        "annotations (the default: approval unless the tool says it only reads).",
    )
    delegation_allowlist = models.ManyToManyField(
        "self",
        symmetrical=False,
        blank=True,
        related_name="+",
        help_text="Agents this agent may ask for help.",
    )
    builtin = models.CharField(max_length=20, choices=Builtin.choices, default="", blank=True)
    removed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "handle"], name="agent_handle_unique_per_owner"
            ),
            models.UniqueConstraint(
                fields=["owner", "builtin"],
                condition=~Q(builtin=""),
                name="agent_one_builtin_of_each_kind_per_owner",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (@{self.handle})"

    @property
    def can_run(self) -> bool:
        return self.removed_at is None and self.model_account_id is not None
