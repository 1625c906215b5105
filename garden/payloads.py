"""The one payload of an agent's face and of a turn: what the API returns, what the live events
carry and what a room page starts from, so the browser never reconciles two shapes. The
serializers are the schema the OpenAPI document shows and the event registry checks."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from garden.models import Agent, Message


class AgentFaceOutput(serializers.Serializer):
    """How an agent shows itself wherever it appears: its id, @handle, name and colour."""

    id = serializers.IntegerField(source="pk")
    handle = serializers.CharField()
    name = serializers.CharField()
    colour = serializers.CharField()


class SpeakerOutput(serializers.Serializer):
    """Who said a turn: a person (the owner, or — in a room of a team workspace — whoever of
    its people posted it), garden, or an agent (with its face)."""

    kind = serializers.ChoiceField(choices=Message.SpeakerKind.values, source="speaker_kind")
    person = serializers.IntegerField(
        source="author_id",
        allow_null=True,
        help_text="The person who said a person's turn (their user id); null on agents', "
        "garden's and on turns said before people were recorded.",
    )
    agent = serializers.IntegerField(source="speaker_agent_id", allow_null=True)
    handle = serializers.CharField(source="speaker_agent.handle", allow_null=True)
    name = serializers.SerializerMethodField()
    colour = serializers.CharField(source="speaker_agent.colour", allow_null=True)

    @extend_schema_field(OpenApiTypes.STR)
    def get_name(self, message: Message) -> str:
        if message.speaker_agent_id:
            return message.speaker_agent.name
        if message.speaker_kind != Message.SpeakerKind.OWNER:
            return "garden"
        author = message.author if message.author_id else None
        return (author.get_short_name() or author.get_username()) if author else "You"


class MessageOutput(serializers.Serializer):
    """A turn, as the API returns it and the ``message.created`` event carries it."""

    id = serializers.IntegerField(source="pk")
    conversation = serializers.IntegerField(source="conversation_id")
    seq = serializers.IntegerField()
    speaker = SpeakerOutput(source="*")
    kind = serializers.CharField()
    content = serializers.JSONField(help_text="The turn's blocks: text, tool_call, tool_result…")
    request = serializers.IntegerField(source="request_id", allow_null=True)
    addressed_agent = serializers.IntegerField(source="addressed_agent_id", allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)
    stopped = serializers.SerializerMethodField(
        help_text="Stop cut this turn short: its text is what was streamed until then."
    )

    def get_stopped(self, message: Message) -> bool:
        return message.stopped_at is not None


# One instance of each, its fields bound once: serialising is read-only, so threads share them.
_MESSAGE_OUTPUT = MessageOutput()
_AGENT_FACE_OUTPUT = AgentFaceOutput()


def message_payload(message: Message) -> dict[str, Any]:
    """The one JSON shape of a turn, used by the API and by live events alike."""
    return _MESSAGE_OUTPUT.to_representation(message)


def agent_face_payload(agent: Agent) -> dict[str, Any]:
    """The one JSON shape of an agent's face."""
    return _AGENT_FACE_OUTPUT.to_representation(agent)


class MessageCreatedEvent(serializers.Serializer):
    """A turn was appended to a conversation (``seq`` is the turn's, for gap detection)."""

    type = serializers.ChoiceField(choices=["message.created"])
    seq = serializers.IntegerField()
    message = MessageOutput()


def message_created_event(message: Message) -> dict[str, Any]:
    return {"type": "message.created", "seq": message.seq, "message": message_payload(message)}
