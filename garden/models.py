"""garden's core rows: model accounts, agents, conversations, messages and artifacts."""

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


class Artifact(models.Model):
    """A file an agent made: a document, chart or picture. Its row outlives its conversation."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="artifacts"
    )
    agent = models.ForeignKey(
        Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="artifacts"
    )
    conversation = models.ForeignKey(
        Conversation, on_delete=models.SET_NULL, null=True, blank=True, related_name="artifacts"
    )
    kind = models.CharField(max_length=20, default="document")
    title = models.CharField(max_length=200)
    mime_type = models.CharField(max_length=100, default="text/plain")
    content = models.TextField(blank=True)
    size = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.title


class MemoryNote(models.Model):
    """A durable note or preference in one memory scope.

    Scopes: ``private:<agent id>``, ``shared:<owner id>``, ``group:<group id>``. The scope of a
    write or a recall comes from the trusted run context, never from model-supplied ids.
    """

    class Kind(models.TextChoices):
        NOTE = "note", "Note"
        PREFERENCE = "preference", "Preference"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_notes"
    )
    scope = models.CharField(max_length=60, db_index=True)
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.NOTE)
    text = models.TextField()
    written_by = models.ForeignKey(
        Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.scope} {self.kind}: {self.text[:40]}"


class Approval(models.Model):
    """A member's pending tool action, waiting for a person's decision."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="approvals"
    )
    request = models.ForeignKey(
        "groups.GroupRequest",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="approvals",
    )
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="approvals"
    )
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="approvals")
    tool_call_id = models.CharField(max_length=100)
    action = models.JSONField(help_text="The exact tool call: {name, arguments}.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    surface = models.CharField(max_length=20, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    reason = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    executed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "tool_call_id"], name="approval_one_per_tool_call"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action.get('name', '?')} by {self.agent} ({self.status})"


class Goal(models.Model):
    """What a run works towards. ``origin`` links it to the conversation that asked for it."""

    class Kind(models.TextChoices):
        CONVERSE = "converse", "Converse"
        TEND = "tend", "Tend"
        DURABLE = "durable", "Durable"
        MISSION = "mission", "Mission"

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        CONCLUDED = "concluded", "Concluded"
        FAILED = "failed", "Failed"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="goals",
        help_text="Empty for system-owned goals (the gardener's).",
    )
    kind = models.CharField(max_length=10, choices=Kind.choices)
    title = models.CharField(max_length=200, blank=True)
    origin = models.JSONField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    created_at = models.DateTimeField(auto_now_add=True)
    concluded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.kind} goal {self.pk}"


class Run(models.Model):
    """One execution of a goal, with a directory under the runtime root."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    run_id = models.CharField(max_length=64, unique=True)
    goal = models.ForeignKey(Goal, on_delete=models.CASCADE, related_name="runs")
    actor = models.CharField(max_length=60, help_text="'gardener', or 'agent:<id>'.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    directory = models.CharField(max_length=500, blank=True)
    outcome = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.run_id
