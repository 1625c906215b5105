"""Reads the dashboard's pages need beyond the garden and groups selectors; all owner-scoped."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Exists, OuterRef, QuerySet
from django.db.models.functions import Length, Substr

from garden.errors import is_row_id
from garden.models import Agent, Artifact, AttachmentData
from groups.models import Group
from groups.rules import MAKER, MIN_RUNNABLE_MEMBERS

CANVAS_LIMIT = 50
# What of a document the Canvas carries in the page: enough to read; the rest is named.
CANVAS_TEXT_CHARS = 20_000


def teammates(agents: Iterable[Agent]) -> list[Agent]:
    """The agents that count towards a group: able to run, and not Agent Father."""
    return [a for a in agents if a.builtin != MAKER and a.can_run]


def can_make_group(agents: Iterable[Agent]) -> bool:
    return len(teammates(agents)) >= MIN_RUNNABLE_MEMBERS


def group_candidates(agents: Iterable[Agent]) -> list[Agent]:
    """Who the creation sheet and the Members editor offer: every agent but the maker."""
    return [a for a in agents if a.builtin != MAKER]


def group_artifacts(*, owner: AbstractBaseUser, group: Group) -> QuerySet[Artifact]:
    """What the group made and what the owner attached, newest first: artifacts of the
    group's conversations, each marked ``attached`` when it is a file the owner sent (whose
    bytes the file view serves; the bytes themselves are not read here)."""
    return (
        Artifact.objects.filter(owner=owner, conversation__group=group)
        .select_related("agent")
        .defer("content")
        .annotate(
            attached=Exists(AttachmentData.objects.filter(artifact=OuterRef("pk"))),
            # The page carries the start of each document, never fifty whole ones.
            preview=Substr("content", 1, CANVAS_TEXT_CHARS),
            chars=Length("content"),
        )
        .order_by("-id")[:CANVAS_LIMIT]
    )


def attachment_file(*, owner: AbstractBaseUser, artifact_id: int) -> tuple[Artifact, bytes] | None:
    """A file the owner attached and its bytes; None for another owner's, or for an artifact
    that is not an attached file."""
    if not is_row_id(artifact_id):
        return None
    row = (
        AttachmentData.objects.filter(artifact_id=artifact_id, artifact__owner=owner)
        .select_related("artifact")
        .first()
    )
    return (row.artifact, bytes(row.data)) if row else None


def agent_groups(*, owner: AbstractBaseUser, agent: Agent) -> QuerySet[Group]:
    return Group.objects.filter(
        owner=owner, deleted_at__isnull=True, memberships__agent=agent
    ).order_by("name", "id")
