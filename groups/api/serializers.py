"""Input and output serializers of the groups API."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from groups.models import MEMORY_SENTENCE

MAX_MEMBERS_LISTED = 50


class ErrorItemOutput(serializers.Serializer):
    field = serializers.CharField()
    code = serializers.CharField()
    message = serializers.CharField()


class ErrorOutput(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    errors = ErrorItemOutput(many=True)


class AgentRefOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    handle = serializers.CharField()


class GroupMemberOutput(serializers.Serializer):
    id = serializers.IntegerField(source="agent.pk")
    handle = serializers.CharField(source="agent.handle")
    name = serializers.CharField(source="agent.name")
    colour = serializers.CharField(source="agent.colour")
    can_run = serializers.BooleanField(source="agent.can_run")
    removed = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_removed(self, membership) -> bool:
        return membership.agent.removed_at is not None


class GroupOutput(serializers.Serializer):
    """A group as the room's header and the roster show it; members in their order."""

    id = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    coordinator = AgentRefOutput()
    members = GroupMemberOutput(source="ordered_memberships", many=True)
    room_cap_chars = serializers.IntegerField()
    memory_sentence = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    archived_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(OpenApiTypes.STR)
    def get_memory_sentence(self, group) -> str:
        return MEMORY_SENTENCE


class GroupCreateInput(serializers.Serializer):
    # Blank or missing names reach the rule set, which refuses them as NAME_REQUIRED.
    name = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        default="",
        help_text="At most 100 characters once trimmed.",
    )
    members = serializers.ListField(
        child=serializers.IntegerField(),
        required=False,
        default=list,
        max_length=MAX_MEMBERS_LISTED,
        help_text="Agent ids, in the order the room lists them.",
    )
    coordinator = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="An agent id among the members; without it Concierge coordinates and joins.",
    )
    room_cap_chars = serializers.IntegerField(
        required=False,
        help_text="Characters of the room sent with each call (4,000 up to the site's "
        "GARDEN_MAX_ROOM_CAP_CHARS); longer threads are bounded or rolled over.",
    )


class GroupChangeInput(serializers.Serializer):
    """Every part is optional; what is left out stays as it is."""

    name = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    members = serializers.ListField(
        child=serializers.IntegerField(),
        required=False,
        max_length=MAX_MEMBERS_LISTED,
        help_text="The whole new membership, in order.",
    )
    coordinator = serializers.IntegerField(required=False)
    room_cap_chars = serializers.IntegerField(
        required=False,
        help_text="Characters of the room sent with each call (4,000 up to the site's "
        "GARDEN_MAX_ROOM_CAP_CHARS); longer threads are bounded or rolled over.",
    )


class GroupDeletedOutput(serializers.Serializer):
    undoUntil = serializers.DateTimeField(help_text="Restore works until this moment.")


class GroupClearedOutput(serializers.Serializer):
    conversations = serializers.IntegerField(help_text="How many conversations were deleted.")
