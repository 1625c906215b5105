"""Input and output serializers of the garden API (agents, accounts, 1:1 conversations)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from garden.budgets import budget_usage
from garden.errors import MAX_ID
from garden.models import AccessToken, Agent, Conversation, ModelAccount
from garden.selectors import account_key_status
from garden.tools import APPROVAL_POLICIES

# An agent's instructions travel with every call it makes: long enough for a real brief.
INSTRUCTIONS_MAX_CHARS = 20_000


class AccountKeyOutput(serializers.Serializer):
    """Where the account's key comes from and whether it works now; never the key."""

    source = serializers.ChoiceField(choices=["operator", "own", "legacy", "none"])
    credential = serializers.CharField(allow_null=True)
    usable = serializers.BooleanField()
    code = serializers.CharField(allow_null=True)
    problem = serializers.CharField(allow_null=True)
    label = serializers.CharField()


class TokenBudgetOutput(serializers.Serializer):
    """The owner's token budgets on the account's operator credential and what its calls
    have spent on it this minute and today (UTC); a null budget is unlimited."""

    credential = serializers.CharField()
    per_minute = serializers.IntegerField(allow_null=True)
    per_day = serializers.IntegerField(allow_null=True)
    used_this_minute = serializers.IntegerField()
    used_today = serializers.IntegerField()


class ModelAccountOutput(serializers.ModelSerializer):
    # The key is write-only: only where it comes from is shown.
    key = serializers.SerializerMethodField()
    has_api_key = serializers.SerializerMethodField()
    token_budget = serializers.SerializerMethodField(
        help_text="For an account on one of the operator's credentials: the owner's token "
        "budgets there and the tokens spent this minute and today; null otherwise."
    )

    class Meta:
        model = ModelAccount
        fields = [
            "id",
            "name",
            "provider",
            "model",
            "base_url",
            "credential",
            "has_api_key",
            "key",
            "timeout_seconds",
            "options",
            "token_budget",
            "created_at",
        ]

    @extend_schema_field(AccountKeyOutput)
    def get_key(self, account: ModelAccount) -> dict:
        return account_key_status(account)

    @extend_schema_field(TokenBudgetOutput(allow_null=True))
    def get_token_budget(self, account: ModelAccount) -> dict | None:
        return budget_usage(owner_id=account.owner_id, account=account)

    def get_has_api_key(self, account: ModelAccount) -> bool:
        return bool(account.api_key_encrypted)


class ModelAccountChangedOutput(ModelAccountOutput):
    """The changed account; ``api_key_cleared`` says its stored key was dropped because the
    base URL or provider changed without a new key (a key never follows an account to another
    host)."""

    api_key_cleared = serializers.BooleanField()

    class Meta(ModelAccountOutput.Meta):
        fields = [*ModelAccountOutput.Meta.fields, "api_key_cleared"]


class _NoSecretRef(serializers.Serializer):
    secret_ref = serializers.CharField(
        required=False,
        write_only=True,
        allow_blank=True,
        help_text="No longer accepted: an owner never names an environment variable.",
    )

    def validate_secret_ref(self, value: str) -> str:
        raise serializers.ValidationError(
            "secret_ref is no longer accepted: choose one of the operator's credentials "
            "(credential) or paste a key (api_key).",
            code="SECRET_REF_NOT_ACCEPTED",
        )


class ModelAccountInput(_NoSecretRef):
    name = serializers.CharField(max_length=100)
    provider = serializers.ChoiceField(choices=ModelAccount.Provider.choices)
    model = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    base_url = serializers.URLField(max_length=500, required=False, allow_blank=True, default="")
    credential = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        default="",
        help_text="One of GET /api/credentials.",
    )
    api_key = serializers.CharField(
        max_length=4096,
        required=False,
        write_only=True,
        help_text="Your own key: stored encrypted, never returned.",
    )
    timeout_seconds = serializers.FloatField(
        min_value=1, max_value=600, required=False, default=60.0
    )
    options = serializers.DictField(required=False, default=dict)


class ModelAccountChangeInput(_NoSecretRef):
    """Every part optional; ``api_key`` replaces the stored key, ``clear_api_key`` forgets it."""

    name = serializers.CharField(max_length=100, required=False)
    model = serializers.CharField(max_length=200, required=False, allow_blank=True)
    base_url = serializers.URLField(max_length=500, required=False, allow_blank=True)
    credential = serializers.CharField(max_length=100, required=False, allow_blank=True)
    api_key = serializers.CharField(max_length=4096, required=False, write_only=True)
    clear_api_key = serializers.BooleanField(required=False, default=False)
    timeout_seconds = serializers.FloatField(min_value=1, max_value=600, required=False)
    options = serializers.DictField(required=False)


class CredentialOutput(serializers.Serializer):
    name = serializers.CharField()
    provider = serializers.CharField()
    base_url = serializers.CharField()


class AgentOutput(serializers.ModelSerializer):
    can_run = serializers.BooleanField(read_only=True)
    delegation_allowlist = serializers.SlugRelatedField(
        slug_field="handle", many=True, read_only=True
    )

    class Meta:
        model = Agent
        fields = [
            "id",
            "handle",
            "name",
            "colour",
            "instructions",
            "model_account",
            "enabled_tools",
            "approval_tools",
            "tool_approvals",
            "delegation_allowlist",
            "builtin",
            "can_run",
            "removed_at",
            "created_at",
        ]


# A handle in the words of a person, not the framework's ('Enter a valid "slug"').
HANDLE_MESSAGES = {
    "invalid": "A handle is letters, digits, - and _ only, with no spaces (it follows @).",
    "max_length": "A handle has at most {max_length} characters.",
    "blank": "Give the agent a handle: it is how you @mention it.",
}


class AgentInput(serializers.Serializer):
    handle = serializers.SlugField(max_length=40, error_messages=HANDLE_MESSAGES)
    name = serializers.CharField(max_length=100)
    colour = serializers.RegexField(
        r"^#[0-9a-fA-F]{6}$",
        required=False,
        help_text="#rrggbb; by default the next of a palette, so faces differ.",
    )
    instructions = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=INSTRUCTIONS_MAX_CHARS
    )
    model_account = serializers.IntegerField(required=False)
    enabled_tools = serializers.ListField(
        child=serializers.CharField(max_length=80), required=False, default=list, max_length=50
    )
    approval_tools = serializers.ListField(
        child=serializers.CharField(max_length=80), required=False, default=list, max_length=50
    )
    tool_approvals = serializers.DictField(
        child=serializers.ChoiceField(choices=APPROVAL_POLICIES),
        required=False,
        default=dict,
        help_text="Each enabled MCP tool's approval: always, never or annotations (the default).",
    )
    delegation_allowlist = serializers.ListField(
        child=serializers.SlugField(max_length=40, error_messages=HANDLE_MESSAGES),
        required=False,
        default=list,
        max_length=200,
    )


class AgentChangeInput(serializers.Serializer):
    """Every part optional; the handle stays (mentions and transcripts name it)."""

    name = serializers.CharField(max_length=100, required=False)
    colour = serializers.RegexField(r"^#[0-9a-fA-F]{6}$", required=False)
    instructions = serializers.CharField(
        required=False, allow_blank=True, max_length=INSTRUCTIONS_MAX_CHARS
    )
    model_account = serializers.IntegerField(required=False)
    enabled_tools = serializers.ListField(
        child=serializers.CharField(max_length=80), required=False, max_length=50
    )
    approval_tools = serializers.ListField(
        child=serializers.CharField(max_length=80), required=False, max_length=50
    )
    tool_approvals = serializers.DictField(
        child=serializers.ChoiceField(choices=APPROVAL_POLICIES), required=False
    )
    delegation_allowlist = serializers.ListField(
        child=serializers.SlugField(max_length=40, error_messages=HANDLE_MESSAGES),
        required=False,
        max_length=200,
    )

    def to_internal_value(self, data):
        if isinstance(data, dict) and "handle" in data:
            raise serializers.ValidationError(
                {"handle": ["The handle cannot change: mentions and transcripts name it."]},
                code="HANDLE_FIXED",
            )
        return super().to_internal_value(data)


# How much of an untitled conversation's first turn names it in a list.
FIRST_WORDS_CHARS = 60
UNTITLED = "New conversation"


def first_words(content: list | None, *, limit: int = FIRST_WORDS_CHARS) -> str:
    """The start of a turn's text on one line, cut at a word within ``limit`` characters."""
    blocks = content if isinstance(content, list) else []
    text = " ".join(
        " ".join(str(b.get("text", "")).split())
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "text"
    ).strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if text[limit - 1] != " " and " " in cut:
        cut = cut.rsplit(" ", 1)[0]  # not in the middle of a word
    return cut.rstrip(" ,.;:") + "…"


class ConversationOutput(serializers.ModelSerializer):
    """A 1:1 conversation as a list shows it (read from ``conversation_summaries``)."""

    last_activity_at = serializers.DateTimeField(
        help_text="When its last turn was written, or when it was started if it has none."
    )
    first_words = serializers.SerializerMethodField(
        help_text="The start of its first turn, on one line ('' before anything is said)."
    )
    label = serializers.SerializerMethodField(
        help_text=f"What a list names it by: its title, else its first words, else '{UNTITLED}'."
    )

    class Meta:
        model = Conversation
        fields = [
            "id",
            "agent",
            "title",
            "label",
            "first_words",
            "status",
            "last_seq",
            "created_at",
            "last_activity_at",
        ]

    def get_first_words(self, conversation: Conversation) -> str:
        return first_words(getattr(conversation, "first_content", None))

    def get_label(self, conversation: Conversation) -> str:
        return conversation.title or self.get_first_words(conversation) or UNTITLED


class ConversationInput(serializers.Serializer):
    agent = serializers.IntegerField()
    title = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="At most 100 characters once trimmed (TITLE_TOO_LONG); blank: untitled.",
    )


class ConversationListQuery(serializers.Serializer):
    agent = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID)
    limit = serializers.IntegerField(
        required=False,
        default=50,
        min_value=1,
        max_value=200,
        help_text="At most this many, the ones spoken in last (default 50, at most 200).",
    )
    before = serializers.DateTimeField(
        required=False,
        help_text="Only those last spoken in before this time: the previous page's last "
        "last_activity_at, for the page after it.",
    )


class ConversationChangeInput(serializers.Serializer):
    title = serializers.CharField(
        allow_blank=True,
        trim_whitespace=False,
        help_text="The new title: at most 100 characters once trimmed (TITLE_TOO_LONG), one "
        "line (TITLE_INVALID); blank makes it untitled again, named by its first words.",
    )


class AccountTestOutput(serializers.Serializer):
    ok = serializers.BooleanField()
    code = serializers.CharField(allow_null=True, help_text="The named failure, when not ok.")
    message = serializers.CharField()


class AccessTokenOutput(serializers.ModelSerializer):
    class Meta:
        model = AccessToken
        fields = ["id", "name", "prefix", "scopes", "created_at", "expires_at", "last_used_at"]


class AccessTokenCreatedOutput(AccessTokenOutput):
    token = serializers.CharField(help_text="The whole token: shown this once, never again.")

    class Meta(AccessTokenOutput.Meta):
        fields = [*AccessTokenOutput.Meta.fields, "token"]


class AccessTokenInput(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="What it is for, e.g. 'CI'.")
    scopes = serializers.ListField(
        child=serializers.CharField(max_length=20),
        required=False,
        max_length=3,
        help_text="Some of read, write (messages, decisions, settings), manage (clear, delete, "
        "restore, archive a group; remove a webhook endpoint, rotate its secret); read and "
        "write when none are given.",
    )
    expires_in_days = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="1 to GARDEN_TOKEN_MAX_DAYS (366); none: GARDEN_TOKEN_DEFAULT_DAYS (90).",
    )
    password = serializers.CharField(
        max_length=4096,
        write_only=True,
        trim_whitespace=False,
        help_text="Your current password: a session alone cannot make a token.",
    )


class McpToolOutput(serializers.Serializer):
    name = serializers.CharField(help_text="The tool's name on its server.")
    agent_tool = serializers.CharField(help_text="mcp.<server>.<tool>: what agents enable.")
    description = serializers.CharField()
    input_schema = serializers.JSONField()
    annotations = serializers.JSONField()
    unusable = serializers.CharField(
        required=False, help_text="Why the tool cannot be offered to a model, when it cannot."
    )


class McpServerOutput(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True, help_text="null for a server the site offers.")
    name = serializers.CharField()
    url = serializers.CharField(help_text="Empty for a local server the site runs.")
    offered_by = serializers.ChoiceField(choices=["owner", "operator"])
    header_names = serializers.ListField(
        child=serializers.CharField(), help_text="The stored headers' names; values never return."
    )
    tools = McpToolOutput(many=True)
    refreshed_at = serializers.DateTimeField(allow_null=True)
    headers_cleared = serializers.BooleanField(required=False)


class McpServerInput(serializers.Serializer):
    name = serializers.CharField(max_length=20)
    url = serializers.CharField(max_length=500)
    headers = serializers.DictField(
        child=serializers.CharField(max_length=4096, allow_blank=True),
        required=False,
        help_text="Sent with every request; stored encrypted and never returned.",
    )
    bearer_token = serializers.CharField(
        max_length=4096, required=False, write_only=True, help_text="Sent as Authorization: Bearer."
    )


class McpServerChangeInput(serializers.Serializer):
    url = serializers.CharField(max_length=500, required=False)
    headers = serializers.DictField(
        child=serializers.CharField(max_length=4096, allow_blank=True), required=False
    )
    bearer_token = serializers.CharField(max_length=4096, required=False, write_only=True)
    clear_headers = serializers.BooleanField(required=False, default=False)
