"""Conversations and their messages: an agent's 1:1 thread or one thread of a group."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from garden.models.agents import Agent


class Conversation(models.Model):
    """A thread: an agent's 1:1 conversation, or one thread of a group."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, null=True, blank=True, related_name="conversations"
    )
    group = models.ForeignKey(
        "groups.Group",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="conversations",
    )
    title = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    carried_summary = models.TextField(
        blank=True, help_text="The rollover summary this thread starts from."
    )
    last_seq = models.PositiveIntegerField(default=0)
    stored_bytes = models.BigIntegerField(
        default=0, help_text="The bytes of its turns' content, added as each is appended."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(agent__isnull=False, group__isnull=True)
                    | Q(agent__isnull=True, group__isnull=False)
                ),
                name="conversation_belongs_to_agent_xor_group",
            ),
        ]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"


class Message(models.Model):
    """One turn. The speaker is trusted metadata set only by server code, never from text.

    ``content`` is a list of blocks: ``{"type": "text", "text"}``, ``{"type": "tool_call",
    "id", "name", "arguments"}``, ``{"type": "tool_result", "call_id", "content",
    "is_error"}``, ``{"type": "artifact_ref", "artifact_id", "kind", "title"}``.
    """

    class SpeakerKind(models.TextChoices):
        OWNER = "owner", "Owner"
        AGENT = "agent", "Agent"
        GARDEN = "garden", "garden"

    class Kind(models.TextChoices):
        TURN = "turn", "Turn"
        COORDINATION = "coordination", "Coordination request"
        ACTIVITY = "activity", "Activity line"
        NOTICE = "notice", "Notice"
        SUMMARY = "summary", "Rollover summary"
        IMPORT = "import", "Imported note"

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    seq = models.PositiveIntegerField()
    speaker_kind = models.CharField(max_length=10, choices=SpeakerKind.choices)
    speaker_agent = models.ForeignKey(
        Agent, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    # The person who said an owner turn, set by server code from the signed-in session or
    # token (never from text): a room of a team workspace names each person by it. No
    # database constraint (adding one would scan the table); deleting a person clears it, and
    # garden 0026 indexes it concurrently.
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_index=False,
        db_constraint=False,
        related_name="+",
    )
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.TURN)
    content = models.JSONField(default=list)
    in_reply_to = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="replies"
    )
    request = models.ForeignKey(
        "groups.GroupRequest",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="messages",
    )
    addressed_agent = models.ForeignKey(
        Agent,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="For a coordination request: the member asked to contribute.",
    )
    reply_to_call_id = models.CharField(max_length=100, blank=True)
    step = models.PositiveIntegerField(
        null=True, blank=True, help_text="The request fence of the step that wrote this turn."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    stopped_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When Stop cut this turn short: it holds what was streamed until then.",
    )

    class Meta:
        ordering = ["conversation_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="message_seq_unique"),
            models.CheckConstraint(
                condition=(
                    Q(speaker_kind="agent", speaker_agent__isnull=False)
                    | (~Q(speaker_kind="agent") & Q(speaker_agent__isnull=True))
                ),
                name="message_agent_speaker_has_agent",
            ),
            # A 1:1 owner turn is answered once, however often its task is delivered.
            models.UniqueConstraint(
                fields=["in_reply_to"],
                condition=Q(in_reply_to__isnull=False),
                name="message_one_reply_per_turn",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.speaker_label}"

    @property
    def speaker_label(self) -> str:
        if self.speaker_kind == self.SpeakerKind.AGENT and self.speaker_agent_id:
            return self.speaker_agent.name
        return "You" if self.speaker_kind == self.SpeakerKind.OWNER else "garden"

    @property
    def text(self) -> str:
        return "\n".join(b.get("text", "") for b in self.content if b.get("type") == "text")
