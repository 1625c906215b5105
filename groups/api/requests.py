"""The room's API: post a message (a request), read the transcript, a request's state and
budget, Stop; and the approvals a person decides. validate → service → serialize; reads go
through selectors, refusals are ServiceErrors mapped in one place."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator
from django.http import QueryDict
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from garden.api.errors import REFUSED, ErrorOutput
from garden.api.parsers import AttachmentsParser, SafeJSONParser
from garden.attachments import Upload
from garden.errors import MAX_ID, ServiceError, not_found
from garden.heartbeat import workers_alive
from garden.models import AccessToken
from garden.payloads import AgentFaceOutput, MessageOutput, message_payload
from groups import selectors
from groups.models import MEMORY_SENTENCE, MESSAGE_MAX_CHARS, Approval, Group
from groups.payloads import (
    ApprovalOutput,
    RequestOutput,
    UsageOutput,
    approval_payload,
    request_payload,
)
from groups.services.approvals import approval_decide
from groups.services.memory import memory_import_private_note
from groups.services.requests import request_cancel, request_create, request_stop_active


def reachable_group(request: Request, group_id: int) -> Group:
    """The group ``group_id`` of one of the person's workspaces. A group they cannot read (of
    another workspace, or deleted) is NOT_FOUND; a change by someone who may only read it
    (a viewer) is 403 WORKSPACE_ROLE."""
    group = selectors.group_get(person=request.user, group_id=group_id)
    if group is None:
        raise not_found("group")
    if request.method not in SAFE_METHODS and not selectors.group_may(request.user, group, "write"):
        raise ServiceError(
            "WORKSPACE_ROLE",
            "You may read this group's room but not change it: a viewer of its workspace "
            "reads only.",
            status=403,
        )
    return group


def int_param(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise ServiceError("invalid", f"{name} must be an integer.", field=name) from exc


def _webhook_field() -> serializers.IntegerField:
    return serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=MAX_ID,
        help_text="One of your webhook endpoints (for this group or all of them) that hears "
        "this request's ending and its approvals, even a named-only one (docs/webhooks.md).",
    )


class MessageTooLong(MaxLengthValidator):
    """MESSAGE_TOO_LONG: the limit and the length said, and what to do instead."""

    code = "MESSAGE_TOO_LONG"

    def __call__(self, value: str) -> None:
        if len(value) > self.limit_value:
            raise ValidationError(
                f"A message can be at most {self.limit_value:,} characters; this one has "
                f"{len(value):,}. Shorten it, or attach the text as a file.",
                code=self.code,
            )


class MessageTextField(serializers.CharField):
    """A room message's text: at most MESSAGE_MAX_CHARS characters, refused by name."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(max_length=MESSAGE_MAX_CHARS, trim_whitespace=True, **kwargs)
        self.validators = [
            *(v for v in self.validators if not isinstance(v, MaxLengthValidator)),
            MessageTooLong(MESSAGE_MAX_CHARS),
        ]


class RoomMessageInput(serializers.Serializer):
    text = MessageTextField()
    webhook = _webhook_field()


@extend_schema_field(OpenApiTypes.BINARY)
class UploadField(serializers.FileField):
    """A file part of the form, documented as the bytes it is."""


class RoomMessageUploadInput(serializers.Serializer):
    """The multipart form: the text (which may be left empty when files come with it) and the
    files, each a picture (PNG, JPEG, GIF, WebP), a PDF or a UTF-8 text document (plain text,
    Markdown, CSV, JSON), recognised by its contents."""

    text = MessageTextField(required=False, allow_blank=True, default="")
    files = serializers.ListField(
        child=UploadField(allow_empty_file=True, use_url=False),
        required=False,
        default=list,
        help_text="Up to GARDEN_MAX_ATTACHMENTS files (4 by default), each at most "
        "GARDEN_ATTACHMENT_MAX_BYTES (5 MB by default).",
    )
    webhook = _webhook_field()


class RoomOutput(serializers.Serializer):
    group = serializers.IntegerField()
    conversation = serializers.IntegerField(allow_null=True)
    carried_summary = serializers.CharField()
    last_seq = serializers.IntegerField()
    messages = MessageOutput(many=True)
    active_request = RequestOutput(allow_null=True)
    queued = RequestOutput(
        many=True, help_text="The requests waiting behind it, the next to start first (20 at most)."
    )
    queued_requests = serializers.IntegerField(help_text="How many requests wait in all.")


class RequestPostedOutput(serializers.Serializer):
    request = RequestOutput()
    message = MessageOutput()


class StoppedOutput(serializers.Serializer):
    stopped = RequestOutput(allow_null=True, help_text="The request Stop ended, if one ran.")


class ApprovalListOutput(serializers.Serializer):
    approvals = ApprovalOutput(many=True)


class DecisionOutput(ApprovalOutput):
    repeated = serializers.BooleanField(help_text="The same decision had already been made.")


def room_message(request: Request) -> tuple[str, list[Upload], int | None]:
    """A room's posted message, JSON or a form with files, validated: its text, its files and
    the webhook endpoint it names, if any."""
    form = isinstance(request.data, QueryDict)
    data = (RoomMessageUploadInput if form else RoomMessageInput)(data=request.data)
    data.is_valid(raise_exception=True)
    uploads = [Upload(name=f.name, data=f.read()) for f in data.validated_data.get("files", [])]
    return data.validated_data["text"], uploads, data.validated_data.get("webhook")


def room_page(conversation, *, after: int, group=None) -> dict:
    """A room's page of its thread: the turns after seq ``after`` and the requests running
    and waiting — the group's (``group``) or the 1:1 thread's."""
    where = {"group": group} if group is not None else {"conversation": conversation}
    messages = (
        selectors.room_messages(conversation=conversation, after=after) if conversation else []
    )
    active = selectors.request_active(**where)
    queued = selectors.requests_queued(**where)
    alive = workers_alive() if active or queued else None
    return {
        "conversation": conversation.pk if conversation else None,
        "last_seq": conversation.last_seq if conversation else 0,
        "messages": [message_payload(m) for m in messages],
        "active_request": request_payload(active, workers_alive=alive) if active else None,
        "queued": [request_payload(r, workers_alive=alive) for r in queued],
        "queued_requests": selectors.requests_queued_count(**where),
    }


def posted(created) -> Response:
    """``202`` with the request a message made and the owner's turn."""
    return Response(
        {
            "request": request_payload(created, workers_alive=workers_alive()),
            "message": message_payload(created.message),
        },
        status=status.HTTP_202_ACCEPTED,
    )


class GroupMessagesApi(APIView):
    # Posting a message starts model calls: its own, tighter rate.
    throttle_scopes = {"POST": "messages"}
    # JSON, or a form with files (the one route that takes them).
    parser_classes = [SafeJSONParser, AttachmentsParser]

    @extend_schema(
        parameters=[
            OpenApiParameter("after", int, description="Only turns with a greater seq."),
            OpenApiParameter("conversation", int, description="A closed thread of the group."),
        ],
        responses={200: RoomOutput, **REFUSED},
    )
    def get(self, request: Request, group_id: int) -> Response:
        group = reachable_group(request, group_id)
        after = max(0, int_param(request, "after") or 0)
        wanted = int_param(request, "conversation")
        conversation = selectors.room_conversation(group=group, conversation_id=wanted)
        if wanted is not None and conversation is None:
            raise not_found("conversation in this group")
        return Response(
            {
                "group": group.pk,
                "carried_summary": conversation.carried_summary if conversation else "",
                **room_page(conversation, after=after, group=group),
            }
        )

    @extend_schema(
        request={
            "application/json": RoomMessageInput,
            "multipart/form-data": RoomMessageUploadInput,
        },
        responses={202: RequestPostedOutput, 429: ErrorOutput, **REFUSED},
    )
    def post(self, request: Request, group_id: int) -> Response:
        group = reachable_group(request, group_id)
        text, uploads, webhook = room_message(request)
        return posted(
            request_create(
                group=group, text=text, attachments=uploads, webhook=webhook, author=request.user
            )
        )


class GroupRequestDetailApi(APIView):
    @extend_schema(responses={200: RequestOutput, **REFUSED})
    def get(self, request: Request, group_id: int, request_id: int) -> Response:
        found = selectors.request_get(
            group=reachable_group(request, group_id), request_id=request_id
        )
        if found is None:
            raise not_found("request")
        return Response(request_payload(found, workers_alive=workers_alive()))


class MemberCostOutput(serializers.Serializer):
    """One member's calls of the request (the coordinator's included)."""

    agent = AgentFaceOutput()
    calls = serializers.IntegerField(
        help_text="Calls that counted (their reservations consumed), recorded replies or not."
    )
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cost = serializers.DecimalField(
        max_digits=18, decimal_places=9, help_text="US dollars, a decimal string."
    )
    unpriced_calls = serializers.IntegerField(
        help_text="Recorded calls whose model has no price: the cost leaves them out."
    )


class RequestCostsOutput(serializers.Serializer):
    request = serializers.IntegerField()
    usage = UsageOutput(help_text="The request's totals: the sums of its members' figures.")
    members = MemberCostOutput(
        many=True, help_text="Per member, in the order each first made a call."
    )


def request_costs(found) -> Response:
    """A request's cost per member, beside its totals (the payload's ``usage``)."""
    return Response(
        RequestCostsOutput(
            {
                "request": found.pk,
                "usage": found,
                "members": selectors.request_member_costs(request=found),
            }
        ).data
    )


class GroupRequestCostsApi(APIView):
    @extend_schema(responses={200: RequestCostsOutput, **REFUSED})
    def get(self, request: Request, group_id: int, request_id: int) -> Response:
        """What the request's calls took and cost, per member."""
        found = selectors.request_get(
            group=reachable_group(request, group_id), request_id=request_id
        )
        if found is None:
            raise not_found("request")
        return request_costs(found)


class GroupRequestCancelApi(APIView):
    @extend_schema(request=None, responses={200: RequestOutput, 409: ErrorOutput, **REFUSED})
    def post(self, request: Request, group_id: int, request_id: int) -> Response:
        """Cancel a request that has not started (a started one is stopped with Stop)."""
        cancelled = request_cancel(group=reachable_group(request, group_id), request_id=request_id)
        return Response(request_payload(cancelled))


class GroupStopApi(APIView):
    @extend_schema(request=None, responses={200: StoppedOutput, **REFUSED})
    def post(self, request: Request, group_id: int) -> Response:
        group = reachable_group(request, group_id)
        stopped = request_stop_active(group=group, reason="Stopped by the owner.")
        return Response({"stopped": request_payload(stopped) if stopped else None})


class ApprovalListApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("state", str, enum=["pending", "approved", "rejected"]),
            OpenApiParameter(
                "conversation",
                int,
                description="Only the approvals of this thread, decided ones included (a "
                "room shows each card where its call was made).",
            ),
        ],
        responses={200: ApprovalListOutput, **REFUSED},
    )
    def get(self, request: Request) -> Response:
        state = request.query_params.get("state") or None
        if state and state not in Approval.Status.values:
            raise ServiceError(
                "invalid_choice",
                f"state must be one of {', '.join(Approval.Status.values)}.",
                field="state",
            )
        approvals = selectors.approval_list(
            owner=request.user, status=state, conversation_id=int_param(request, "conversation")
        )
        return Response({"approvals": [approval_payload(a) for a in approvals]})


# What a client of the API may say it decided from: Telegram's decisions come from its own
# webhook and the admin's from the admin, never from a client claiming to be them.
CLIENT_SURFACES = ("dashboard", "api")


class DecisionInput(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["approve", "reject"])
    arguments = serializers.DictField(
        required=False,
        help_text="With approve: the arguments to run it with instead of the requested ones, "
        "checked against the tool's schema (400 INVALID_ARGUMENTS). The approval keeps both.",
    )
    surface = serializers.ChoiceField(
        choices=list(CLIENT_SURFACES),
        default="dashboard",
        help_text="Where the person decided; a request made with an access token is 'api'.",
    )


class ApprovalDecideApi(APIView):
    # An approved action runs with the arguments given here: a script deciding for its owner
    # holds the one check on what its agents do.
    token_scopes = {"POST": "manage"}

    @extend_schema(
        request=DecisionInput, responses={200: DecisionOutput, 409: ErrorOutput, **REFUSED}
    )
    def post(self, request: Request, approval_id: int) -> Response:
        data = DecisionInput(data=request.data)
        data.is_valid(raise_exception=True)
        surface = data.validated_data["surface"]
        if isinstance(request.auth, AccessToken):
            surface = "api"  # a script, whatever it says
        decision = approval_decide(
            user=request.user,
            approval_id=approval_id,
            decision=data.validated_data["decision"],
            surface=surface,
            arguments=data.validated_data.get("arguments"),
        )
        return Response({**approval_payload(decision.approval), "repeated": decision.repeated})


class MemoryImportInput(serializers.Serializer):
    note = serializers.IntegerField(min_value=1)


class NoteOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    kind = serializers.CharField()
    text = serializers.CharField()
    scope = serializers.CharField()
    created_at = serializers.DateTimeField()


class GroupMemoryOutput(serializers.Serializer):
    memory_sentence = serializers.CharField()
    notes = NoteOutput(many=True)


class GroupMemoryApi(APIView):
    @extend_schema(responses={200: GroupMemoryOutput, **REFUSED})
    def get(self, request: Request, group_id: int) -> Response:
        group = reachable_group(request, group_id)
        notes = selectors.group_memory(group=group)
        return Response(
            GroupMemoryOutput({"memory_sentence": MEMORY_SENTENCE, "notes": notes}).data
        )


class GroupMemoryImportApi(APIView):
    @extend_schema(request=MemoryImportInput, responses={201: NoteOutput, **REFUSED})
    def post(self, request: Request, group_id: int) -> Response:
        group = reachable_group(request, group_id)
        data = MemoryImportInput(data=request.data)
        data.is_valid(raise_exception=True)
        note = memory_import_private_note(
            owner=request.user, group=group, note_id=data.validated_data["note"]
        )
        return Response(NoteOutput(note).data, status=status.HTTP_201_CREATED)
