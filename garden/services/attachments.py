"""Writes for the files an owner attaches: each becomes an Artifact of the conversation it was
posted to, its bytes in an AttachmentData row beside it (never on a local disk: the workers
that read them run on other machines)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet, Sum

from garden.attachments import Attachment
from garden.errors import QuotaExceeded
from garden.models import Artifact, AttachmentData
from garden.providers import ArtifactRef
from garden.quotas import quota_hold
from garden.transcript import block_to_json


def attachment_store(*, owner_id: int, conversation_id: int, attachment: Attachment) -> Artifact:
    """One checked attachment as an Artifact and its bytes. Caller holds the transaction the
    owner's turn is written in, so a refused turn leaves no file behind."""
    artifact = Artifact.objects.create(
        owner_id=owner_id,
        agent=None,
        conversation_id=conversation_id,
        kind=attachment.kind,
        title=attachment.title,
        mime_type=attachment.mime_type,
        # A text document keeps its text too, for file.read to page it.
        content=attachment.text,
        size=attachment.size,
    )
    AttachmentData.objects.create(artifact=artifact, data=attachment.data)
    return artifact


def artifact_ref_block(artifact: Artifact) -> dict[str, Any]:
    """The content block that stands for ``artifact`` in a turn."""
    return block_to_json(
        ArtifactRef(artifact_id=str(artifact.pk), kind=artifact.kind, title=artifact.title)
    )


def attachment_bytes_hold(*, owner_id: int) -> None:
    """After storing an owner's files, in the same transaction: refuse when all the files the
    owner has attached pass GARDEN_MAX_ATTACHMENT_BYTES_PER_OWNER (the database is shared;
    clearing a group's history frees what was attached in it)."""
    limit = settings.GARDEN_MAX_ATTACHMENT_BYTES_PER_OWNER

    def stored() -> int:
        found = Artifact.objects.filter(owner_id=owner_id, attachment_data__isnull=False)
        return found.aggregate(total=Sum("size"))["total"] or 0

    quota_hold(
        owner_id=owner_id,
        limit=limit,
        count=stored,
        refusal=lambda: QuotaExceeded(
            "ATTACHMENT_STORAGE_FULL",
            f"Your attached files would pass {limit:,} bytes, the limit on this site; clear "
            "a group's history to free what was attached there.",
            field="files",
        ),
    )


def attachments_delete(*, conversations: QuerySet) -> int:
    """Delete the files attached in ``conversations`` (their Artifact rows and bytes): they go
    with the history they were posted in. What agents wrote stays in the library."""
    deleted, _ = Artifact.objects.filter(
        conversation__in=conversations, attachment_data__isnull=False
    ).delete()
    return deleted
