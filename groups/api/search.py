"""``GET /api/search``: the signed-in person's turns that hold the words they typed, newest
first, each with where it was said and the room's address at that turn. validate → selector →
serialize; the dashboard's search page shows the same payload."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from garden.api.errors import ErrorOutput
from garden.errors import MAX_ID
from garden.models import Message
from garden.payloads import SpeakerOutput
from groups.search import LIMIT_MAX, QUERY_MAX_CHARS, search_query_check, snippet, turn_search


class SearchInput(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=LIMIT_MAX, default=20)
    before = serializers.IntegerField(min_value=1, max_value=MAX_ID, required=False)


def room_url(message: Message) -> str:
    """The dashboard's room of the turn's conversation, opened at the turn."""
    conversation = message.conversation
    if conversation.group_id is not None:
        room = reverse("dashboard:room", args=[conversation.group_id])
    else:
        room = reverse("dashboard:agent_room", args=[conversation.agent_id])
    return f"{room}?conversation={conversation.pk}#turn-{message.seq}"


class SearchResultOutput(serializers.Serializer):
    """One turn found: where it was said, who said it, a piece of its text around the words."""

    id = serializers.IntegerField(source="pk", help_text="The turn's id.")
    conversation = serializers.IntegerField(source="conversation_id")
    group = serializers.IntegerField(
        source="conversation.group_id", allow_null=True, help_text="Null: a 1:1 conversation."
    )
    agent = serializers.IntegerField(
        source="conversation.agent_id",
        allow_null=True,
        help_text="The agent of a 1:1 conversation; null in a group's thread.",
    )
    room = serializers.SerializerMethodField(help_text="The group's name, or the agent's.")
    room_url = serializers.SerializerMethodField(
        help_text="The dashboard's room at this turn (its anchor is #turn-<seq>)."
    )
    seq = serializers.IntegerField()
    kind = serializers.CharField()
    speaker = SpeakerOutput(source="*")
    snippet = serializers.SerializerMethodField(
        help_text="The turn's text around the first word found, on one line."
    )
    created_at = serializers.DateTimeField()

    @extend_schema_field(OpenApiTypes.STR)
    def get_room(self, message: Message) -> str:
        conversation = message.conversation
        if conversation.group_id is not None:
            return conversation.group.name
        return conversation.agent.name

    @extend_schema_field(OpenApiTypes.STR)
    def get_room_url(self, message: Message) -> str:
        return room_url(message)

    @extend_schema_field(OpenApiTypes.STR)
    def get_snippet(self, message: Message) -> str:
        return snippet(message.text, self.context.get("terms", ()))


class SearchOutput(serializers.Serializer):
    q = serializers.CharField(help_text="The query as searched (trimmed).")
    results = SearchResultOutput(many=True)
    next_before = serializers.IntegerField(
        allow_null=True, help_text="Pass as before for the next (older) page; null: no more."
    )


def search_payload(*, owner: Any, q: str | None, limit: int, before: int | None) -> dict:
    """The one JSON shape of a page of search results (the API's and the search page's).
    Refuses a query search cannot read (SEARCH_QUERY_INVALID)."""
    query = search_query_check(q=q)
    rows = turn_search(owner=owner, query=query, limit=limit + 1, before=before)
    page = rows[:limit]
    results = SearchResultOutput(page, many=True, context={"terms": query.terms}).data
    return {
        "q": query.text,
        "results": results,
        "next_before": page[-1].pk if len(rows) > limit else None,
    }


class SearchApi(APIView):
    throttle_scopes = {"GET": "search"}

    @extend_schema(
        operation_id="search_turns",
        parameters=[
            OpenApiParameter(
                "q",
                str,
                required=True,
                description=f"The words to find (every one must appear), {QUERY_MAX_CHARS} "
                "characters at most. Empty, too long or without a letter or digit: 400 "
                "SEARCH_QUERY_INVALID.",
            ),
            SearchInput,
        ],
        responses={200: SearchOutput, 400: ErrorOutput, 403: ErrorOutput},
        description="The turns of your 1:1 conversations and your groups' threads whose text "
        "holds every word, newest first (page with before=next_before).",
    )
    def get(self, request: Request) -> Response:
        data = SearchInput(data=request.query_params)
        data.is_valid(raise_exception=True)
        return Response(
            search_payload(
                owner=request.user,
                q=request.query_params.get("q"),
                limit=data.validated_data["limit"],
                before=data.validated_data.get("before"),
            )
        )
