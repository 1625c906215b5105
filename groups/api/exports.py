"""A room's history as a download: a group's every thread, or one 1:1 conversation, as JSON
(schema/conversation-export.schema.json) or Markdown. Owner-only (another owner's is a 404),
a read that writes nothing, built whole in memory under GARDEN_EXPORT_MAX_BYTES and sent after
the database connection is handed back, so no connection waits on a slow download."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from django.utils.http import content_disposition_header
from django.utils.text import slugify
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from garden.api.errors import ErrorOutput, not_found_response
from garden.errors import ServiceError, not_found
from garden.selectors import conversation_get
from groups.api.requests import reachable_group
from groups.export.documents import json_chunks, markdown_chunks
from groups.export.history import conversation_export, group_history_export
from groups.export.records import FORMATS, ExportRecord, collect
from groups.loop.room import release_connection

MEDIA_TYPES = {"json": "application/json", "markdown": "text/markdown"}
EXTENSIONS = {"json": "json", "markdown": "md"}
WRITERS = {"json": json_chunks, "markdown": markdown_chunks}


# --- the document's shape, for the OpenAPI schema (the JSON Schema file is its twin) ---------


class ExportAgentOutput(serializers.Serializer):
    id = serializers.IntegerField()
    handle = serializers.CharField(allow_null=True)
    name = serializers.CharField()


class ExportSpeakerOutput(serializers.Serializer):
    kind = serializers.CharField(help_text="owner, agent or garden.")
    name = serializers.CharField(help_text="The name shown: the agent's, the owner's, garden.")
    agent = ExportAgentOutput(allow_null=True)


class ExportToolCallOutput(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    arguments = serializers.DictField()


class ExportToolResultOutput(serializers.Serializer):
    call_id = serializers.CharField()
    content = serializers.CharField()
    is_error = serializers.BooleanField()


class ExportArtifactRefOutput(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.CharField()
    title = serializers.CharField()


class ExportTurnOutput(serializers.Serializer):
    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    time = serializers.DateTimeField(allow_null=True)
    kind = serializers.CharField(
        help_text="turn, coordination (a request to a member), activity, notice, summary or import."
    )
    speaker = ExportSpeakerOutput()
    text = serializers.CharField(help_text="The turn's text blocks, joined by newlines.")
    tool_calls = ExportToolCallOutput(many=True)
    tool_results = ExportToolResultOutput(many=True)
    artifacts = ExportArtifactRefOutput(many=True, help_text="References, never contents.")
    request = serializers.IntegerField(allow_null=True)
    addressed_agent = serializers.IntegerField(allow_null=True)


class ExportRequestOutput(serializers.Serializer):
    id = serializers.IntegerField()
    state = serializers.CharField()
    source = serializers.CharField()
    outcome_code = serializers.CharField()
    outcome = serializers.CharField()
    created_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class ExportActionOutput(serializers.Serializer):
    name = serializers.CharField()
    arguments = serializers.DictField()


class ExportApprovalOutput(serializers.Serializer):
    id = serializers.IntegerField()
    tool_call_id = serializers.CharField()
    request = serializers.IntegerField(allow_null=True)
    agent = ExportSpeakerOutput()
    action = ExportActionOutput(help_text="The tool call as the agent asked for it.")
    approved_arguments = serializers.DictField(
        allow_null=True, help_text="What it was approved with, when the person changed it."
    )
    status = serializers.CharField(help_text="pending, approved or rejected.")
    decided_by = serializers.CharField(allow_null=True, help_text="The person who decided.")
    surface = serializers.CharField(help_text="Where it was decided: dashboard, api, telegram…")
    reason = serializers.CharField()
    created_at = serializers.DateTimeField(allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    executed_at = serializers.DateTimeField(allow_null=True)


class ExportConversationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    status = serializers.CharField(help_text="open or closed.")
    created_at = serializers.DateTimeField(allow_null=True)
    closed_at = serializers.DateTimeField(allow_null=True)
    carried_summary = serializers.CharField()
    turns = ExportTurnOutput(many=True, help_text="In seq order.")
    requests = ExportRequestOutput(many=True)
    approvals = ExportApprovalOutput(many=True)


class ExportArtifactOutput(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    title = serializers.CharField()
    mime_type = serializers.CharField()
    size = serializers.IntegerField()
    conversation = serializers.IntegerField(allow_null=True)
    agent = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)


class ConversationExportOutput(serializers.Serializer):
    """A room's history: schema/conversation-export.schema.json."""

    format = serializers.ChoiceField(choices=["garden.conversation-export"])
    version = serializers.IntegerField()
    exported_at = serializers.DateTimeField()
    scope = serializers.ChoiceField(choices=["group", "conversation"])
    title = serializers.CharField()
    owner = serializers.CharField()
    group = serializers.IntegerField(allow_null=True)
    agent = ExportSpeakerOutput(allow_null=True, help_text="A 1:1 conversation's agent.")
    members = ExportSpeakerOutput(many=True)
    conversations = ExportConversationOutput(many=True, help_text="Oldest first.")
    artifacts = ExportArtifactOutput(many=True, help_text="By reference, without contents.")


# --- the views ----------------------------------------------------------------------------


class _ErrorsAsJSON(DefaultContentNegotiation):
    """``format`` names the export's format, not a renderer: the answer is built by the view,
    and a refusal is JSON whatever was asked."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


def export_format(request: Request) -> str:
    value = request.query_params.get("format") or "json"
    if value not in FORMATS:
        raise ServiceError(
            "EXPORT_FORMAT_INVALID", "format must be json or markdown.", field="format"
        )
    return value


def download(export: ExportRecord, *, fmt: str, name: str) -> HttpResponse:
    """The export written whole under the cap, the connection handed back, then the file."""
    body = collect(WRITERS[fmt](export), max_bytes=settings.GARDEN_EXPORT_MAX_BYTES)
    release_connection()
    response = HttpResponse(body, content_type=f"{MEDIA_TYPES[fmt]}; charset=utf-8")
    day = export.exported_at.date().isoformat()
    filename = f"garden-{slugify(name)[:60] or 'history'}-{day}.{EXTENSIONS[fmt]}"
    response["Content-Disposition"] = content_disposition_header(
        as_attachment=True, filename=filename
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response


_FORMAT = OpenApiParameter(
    "format",
    str,
    enum=list(FORMATS),
    description="json (the default; schema/conversation-export.schema.json) or markdown.",
)


def _responses(what: str) -> dict:
    return {
        (200, "application/json"): ConversationExportOutput,
        (200, "text/markdown"): OpenApiTypes.STR,
        400: OpenApiResponse(
            ErrorOutput, description="EXPORT_FORMAT_INVALID: not json or markdown."
        ),
        403: ErrorOutput,
        404: not_found_response(what),
        413: OpenApiResponse(
            ErrorOutput, description="EXPORT_TOO_LARGE: past GARDEN_EXPORT_MAX_BYTES."
        ),
    }


class GroupExportApi(APIView):
    # An export builds a whole history in memory: its own, tighter rate.
    throttle_scopes = {"GET": "exports"}
    renderer_classes = [JSONRenderer]
    content_negotiation_class = _ErrorsAsJSON

    @extend_schema(
        operation_id="export_group_history",
        tags=["groups"],
        parameters=[_FORMAT],
        responses=_responses("group"),
        description="Every thread of the group, oldest first, as a download: turns with their "
        "speakers, tool calls and results, approvals with their decisions, requests, and "
        "artifacts by reference.",
    )
    def get(self, request: Request, group_id: int) -> HttpResponse:
        fmt = export_format(request)
        group = reachable_group(request, group_id)
        # The group's threads are its owner's, whoever of its workspace reads them.
        export = group_history_export(owner=group.owner, group=group)
        return download(export, fmt=fmt, name=f"{group.name}-group-{group.pk}")


class ConversationExportApi(APIView):
    throttle_scopes = {"GET": "exports"}
    renderer_classes = [JSONRenderer]
    content_negotiation_class = _ErrorsAsJSON

    @extend_schema(
        operation_id="export_conversation",
        parameters=[_FORMAT],
        responses=_responses("conversation"),
        description="One 1:1 conversation as a download, in the same shape as a group's.",
    )
    def get(self, request: Request, conversation_id: int) -> HttpResponse:
        fmt = export_format(request)
        conversation = conversation_get(owner=request.user, conversation_id=conversation_id)
        if conversation is None or conversation.agent_id is None:
            raise not_found("conversation")
        export = conversation_export(owner=request.user, conversation=conversation)
        return download(
            export, fmt=fmt, name=f"{conversation.agent.name}-conversation-{conversation.pk}"
        )
