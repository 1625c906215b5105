"""Writes for the files an owner attaches: each becomes an Artifact of the conversation it was
posted to, its bytes in an AttachmentData row beside it (never on a local disk: the workers
that read them run on other machines)."""

from __future__ import annotations

from typing import Any

from garden.attachments import Attachment
from garden.models import Artifact, AttachmentData


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
    return {
        "type": "artifact_ref",
        "artifact_id": str(artifact.pk),
        "kind": artifact.kind,
        "title": artifact.title,
    }
