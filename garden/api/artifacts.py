"""The owner's documents: every artifact they keep, with its size and where it came from (or
"no conversation" once its history was cleared or its group purged), their storage against
the site's limit, and deleting one. validate → service → serialize."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from garden.models import Artifact
from garden.payloads import AgentFaceOutput
from garden.services.artifacts import artifact_delete
from garden.storage import owner_artifacts, storage_usage

LIST_MAX = 500


class ArtifactListInput(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=LIST_MAX, default=100)
    before = serializers.IntegerField(min_value=1, max_value=2**63 - 1, required=False)


class StorageUsageOutput(serializers.Serializer):
    artifacts = serializers.IntegerField(help_text="Bytes of documents, outputs and files.")
    notes = serializers.IntegerField(help_text="Bytes of memory notes.")
    turns = serializers.IntegerField(help_text="Bytes of stored turns.")
    total = serializers.IntegerField()
    limit = serializers.IntegerField(help_text="GARDEN_MAX_STORAGE_BYTES_PER_OWNER.")


class ArtifactConversationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    group = serializers.IntegerField(allow_null=True)


class ArtifactOutput(serializers.Serializer):
    """A document in the owner's list, as the API and the Documents page show it."""

    id = serializers.IntegerField(source="pk")
    title = serializers.CharField()
    kind = serializers.CharField()
    mime_type = serializers.CharField()
    size = serializers.IntegerField(help_text="Bytes.")
    attached = serializers.SerializerMethodField(
        help_text="A file the owner attached, not an agent's."
    )
    agent = AgentFaceOutput(allow_null=True)
    conversation = serializers.SerializerMethodField(
        help_text="Null: no conversation (its history cleared or purged)."
    )
    where = serializers.SerializerMethodField(help_text='Where it came from, or "no conversation".')
    created_at = serializers.DateTimeField()

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_attached(self, artifact: Artifact) -> bool:
        return bool(getattr(artifact, "attached", False))

    @extend_schema_field(ArtifactConversationOutput(allow_null=True))
    def get_conversation(self, artifact: Artifact) -> dict[str, Any] | None:
        conversation = artifact.conversation
        if conversation is None:
            return None
        return {"id": conversation.pk, "title": str(conversation), "group": conversation.group_id}

    @extend_schema_field(OpenApiTypes.STR)
    def get_where(self, artifact: Artifact) -> str:
        conversation = artifact.conversation
        if conversation is None:
            return "no conversation"
        if conversation.group_id is not None:
            return conversation.group.name
        return f"1:1 with @{conversation.agent.handle}" if conversation.agent else "1:1"


class ArtifactListOutput(serializers.Serializer):
    artifacts = ArtifactOutput(many=True)
    next_before = serializers.IntegerField(allow_null=True)
    usage = StorageUsageOutput()


_ARTIFACT_OUTPUT = ArtifactOutput()


def artifact_payload(artifact: Artifact) -> dict[str, Any]:
    """The one JSON shape of a document in the owner's list (API and dashboard)."""
    return _ARTIFACT_OUTPUT.to_representation(artifact)


class ArtifactListApi(APIView):
    @extend_schema(
        parameters=[ArtifactListInput],
        responses=ArtifactListOutput,
        description="Your documents, newest first (page with before=next_before), and your "
        "stored bytes against the site's limit.",
    )
    def get(self, request: Request) -> Response:
        data = ArtifactListInput(data=request.query_params)
        data.is_valid(raise_exception=True)
        limit = data.validated_data["limit"]
        found = owner_artifacts(owner_id=request.user.pk)
        if "before" in data.validated_data:
            found = found.filter(pk__lt=data.validated_data["before"])
        rows = list(found[: limit + 1])
        page = rows[:limit]
        return Response(
            {
                "artifacts": [artifact_payload(a) for a in page],
                "next_before": page[-1].pk if len(rows) > limit else None,
                "usage": storage_usage(owner_id=request.user.pk).to_json(),
            }
        )


class ArtifactDetailApi(APIView):
    @extend_schema(request=None, responses={204: None}, description="Delete one of your documents.")
    def delete(self, request: Request, artifact_id: int) -> Response:
        artifact_delete(owner=request.user, artifact_id=artifact_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
