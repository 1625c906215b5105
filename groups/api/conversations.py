"""A 1:1 conversation's room API: post a message to the agent (a request of the agent's own
room, on the group loop), read the thread, a request, cancel a queued one, Stop. The same
payloads as a group's room; its approvals are in ``GET /api/approvals`` like any other."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from garden.api.errors import REFUSED, ErrorOutput
from garden.api.parsers import AttachmentsParser, SafeJSONParser
from garden.errors import not_found
from garden.heartbeat import workers_alive
from garden.models import Conversation
from garden.payloads import MessageOutput
from garden.selectors import conversation_get
from groups import selectors
from groups.api.requests import (
    RequestCostsOutput,
    RequestPostedOutput,
    RoomMessageInput,
    RoomMessageUploadInput,
    StoppedOutput,
    int_param,
    posted,
    request_costs,
    room_message,
    room_page,
)
from groups.payloads import RequestOutput, request_payload
from groups.services.requests import (
    conversation_request_create,
    request_cancel,
    request_stop_active,
)


def _conversation(request: Request, conversation_id: int) -> Conversation:
    """One of the person's 1:1 conversations (a group's thread is read through its group)."""
    found = conversation_get(owner=request.user, conversation_id=conversation_id)
    if found is None or found.agent_id is None:
        raise not_found("conversation")
    return found


class ConversationRoomOutput(serializers.Serializer):
    conversation = serializers.IntegerField()
    agent = serializers.IntegerField(help_text="The agent this conversation is with.")
    last_seq = serializers.IntegerField()
    messages = MessageOutput(many=True)
    active_request = RequestOutput(allow_null=True)
    queued = RequestOutput(
        many=True, help_text="The requests waiting behind it, the next to start first (20 at most)."
    )
    queued_requests = serializers.IntegerField(help_text="How many requests wait in all.")


class ConversationMessagesApi(APIView):
    # Posting a message starts model calls: its own, tighter rate.
    throttle_scopes = {"POST": "messages"}
    parser_classes = [SafeJSONParser, AttachmentsParser]

    @extend_schema(
        parameters=[OpenApiParameter("after", int, description="Only turns with a greater seq.")],
        responses={200: ConversationRoomOutput, **REFUSED},
    )
    def get(self, request: Request, conversation_id: int) -> Response:
        conversation = _conversation(request, conversation_id)
        after = max(0, int_param(request, "after") or 0)
        return Response({"agent": conversation.agent_id, **room_page(conversation, after=after)})

    @extend_schema(
        request={
            "application/json": RoomMessageInput,
            "multipart/form-data": RoomMessageUploadInput,
        },
        responses={202: RequestPostedOutput, 409: ErrorOutput, 429: ErrorOutput, **REFUSED},
    )
    def post(self, request: Request, conversation_id: int) -> Response:
        conversation = _conversation(request, conversation_id)
        text, uploads, webhook = room_message(request)
        return posted(
            conversation_request_create(
                owner=request.user,
                conversation=conversation,
                text=text,
                attachments=uploads,
                webhook=webhook,
            )
        )


class ConversationRequestDetailApi(APIView):
    @extend_schema(responses={200: RequestOutput, **REFUSED})
    def get(self, request: Request, conversation_id: int, request_id: int) -> Response:
        conversation = _conversation(request, conversation_id)
        found = selectors.request_get(conversation=conversation, request_id=request_id)
        if found is None:
            raise not_found("request")
        return Response(request_payload(found, workers_alive=workers_alive()))


class ConversationRequestCostsApi(APIView):
    @extend_schema(responses={200: RequestCostsOutput, **REFUSED})
    def get(self, request: Request, conversation_id: int, request_id: int) -> Response:
        """What the request's calls took and cost, per member."""
        conversation = _conversation(request, conversation_id)
        found = selectors.request_get(conversation=conversation, request_id=request_id)
        if found is None:
            raise not_found("request")
        return request_costs(found)


class ConversationRequestCancelApi(APIView):
    @extend_schema(request=None, responses={200: RequestOutput, 409: ErrorOutput, **REFUSED})
    def post(self, request: Request, conversation_id: int, request_id: int) -> Response:
        """Cancel a request that has not started (a started one is stopped with Stop)."""
        conversation = _conversation(request, conversation_id)
        room = selectors.solo_room_of(conversation=conversation)
        if room is None:
            raise not_found("request")
        cancelled = request_cancel(
            group=room, request_id=request_id, conversation_id=conversation.pk
        )
        return Response(request_payload(cancelled))


class ConversationStopApi(APIView):
    @extend_schema(request=None, responses={200: StoppedOutput, **REFUSED})
    def post(self, request: Request, conversation_id: int) -> Response:
        """Stop the conversation's running request: its pending approval is rejected, and
        nothing late (a step, an approval) restarts it."""
        conversation = _conversation(request, conversation_id)
        room = selectors.solo_room_of(conversation=conversation)
        stopped = (
            request_stop_active(
                group=room, reason="Stopped by the owner.", conversation_id=conversation.pk
            )
            if room is not None
            else None
        )
        return Response({"stopped": request_payload(stopped) if stopped else None})
