"""Input and output serializers of the groups API."""

from __future__ import annotations

from rest_framework import serializers

from garden.errors import MAX_ID

MAX_MEMBERS_LISTED = 50


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
    workspace = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=MAX_ID,
        help_text="A workspace you may write in, whose people share the room (by their "
        "roles); without it, your own.",
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
