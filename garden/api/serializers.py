"""Input and output serializers of the garden API (agents, accounts, 1:1 conversations)."""

from __future__ import annotations

from rest_framework import serializers

from garden.models import Agent, Conversation, ModelAccount


class ModelAccountOutput(serializers.ModelSerializer):
    class Meta:
        model = ModelAccount
        # The key never leaves the worker; only where it lives is shown.
        fields = ["id", "name", "provider", "model", "base_url", "secret_ref", "timeout_seconds",
                  "created_at"]


class ModelAccountInput(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    provider = serializers.ChoiceField(choices=ModelAccount.Provider.choices)
    model = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    base_url = serializers.URLField(max_length=500, required=False, allow_blank=True, default="")
    secret_ref = serializers.RegexField(
        r"^(env:[A-Za-z_][A-Za-z0-9_]*)?$", max_length=200, required=False, allow_blank=True,
        default="", error_messages={"invalid": "Use env:VARIABLE_NAME; never the key itself."},
    )
    timeout_seconds = serializers.FloatField(min_value=1, max_value=600, required=False, default=60.0)
    options = serializers.DictField(required=False, default=dict)

    def validate(self, data):
        if data["provider"] != ModelAccount.Provider.SCRIPTED and not data.get("model"):
            raise serializers.ValidationError({"model": "A model name is required."}, code="required")
        return data


class AgentOutput(serializers.ModelSerializer):
    can_run = serializers.BooleanField(read_only=True)
    delegation_allowlist = serializers.SlugRelatedField(slug_field="handle", many=True, read_only=True)

    class Meta:
        model = Agent
        fields = ["id", "handle", "name", "colour", "instructions", "model_account", "enabled_tools",
                  "approval_tools", "delegation_allowlist", "builtin", "can_run", "removed_at",
                  "created_at"]


class AgentInput(serializers.Serializer):
    handle = serializers.SlugField(max_length=40)
    name = serializers.CharField(max_length=100)
    colour = serializers.RegexField(r"^#[0-9a-fA-F]{6}$", required=False, default="#5b8def")
    instructions = serializers.CharField(required=False, allow_blank=True, default="")
    model_account = serializers.IntegerField(required=False)
    enabled_tools = serializers.ListField(child=serializers.CharField(max_length=80), required=False, default=list)
    approval_tools = serializers.ListField(child=serializers.CharField(max_length=80), required=False, default=list)
    delegation_allowlist = serializers.ListField(child=serializers.SlugField(max_length=40), required=False, default=list)


class ConversationOutput(serializers.ModelSerializer):
    class Meta:
        model = Conversation
        fields = ["id", "agent", "title", "status", "last_seq", "created_at"]


class ConversationInput(serializers.Serializer):
    agent = serializers.IntegerField()
    title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class MessageInput(serializers.Serializer):
    text = serializers.CharField(max_length=20_000, trim_whitespace=True)
