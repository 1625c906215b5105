"""Reads the dashboard's pages need beyond the garden and groups selectors; all owner-scoped."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Length, Substr

from garden.errors import is_row_id
from garden.models import Agent, Artifact, AttachmentData
from garden.tools import asks_by_annotations
from garden.tools.mcp import servers_offered
from groups.domain.rules import MAKER, MIN_RUNNABLE_MEMBERS
from groups.models import Approval, Group, GroupRequest
from groups.selectors import groups_reachable

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


def group_artifacts(
    *, owner: AbstractBaseUser, group: Group | None = None, conversation_id: int | None = None
) -> QuerySet[Artifact]:
    """What the group (or the 1:1 conversation ``conversation_id``) made and what the owner
    attached, newest first: artifacts of the group's conversations, each marked ``attached``
    when it is a file the owner sent (whose bytes the file view serves; the bytes themselves
    are not read here)."""
    where = {"conversation__group": group} if group is not None else {}
    if conversation_id is not None:
        where = {"conversation_id": conversation_id}
    return (
        Artifact.objects.filter(owner=owner, **where)
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


def _reachable_artifact(person: AbstractBaseUser, prefix: str) -> Q:
    """The person's own artifacts, and those of the groups' rooms their workspaces share."""
    shared = groups_reachable(person=person).filter(kind=Group.Kind.TEAM)
    return Q(**{f"{prefix}owner": person}) | Q(**{f"{prefix}conversation__group__in": shared})


def attachment_file(*, owner: AbstractBaseUser, artifact_id: int) -> tuple[Artifact, bytes] | None:
    """A file the owner attached and its bytes; None for another owner's, or for an artifact
    that is not an attached file."""
    if not is_row_id(artifact_id):
        return None
    row = (
        AttachmentData.objects.filter(artifact_id=artifact_id)
        .filter(_reachable_artifact(owner, "artifact__"))
        .select_related("artifact")
        .first()
    )
    return (row.artifact, bytes(row.data)) if row else None


# What a document is downloaded as when its title has no extension, by its media type.
_EXTENSIONS = {
    "text/markdown": ".md",
    "text/plain": ".txt",
    "text/csv": ".csv",
    "application/json": ".json",
    "application/vnd.garden.chart+json": ".json",
}


def artifact_download(
    *, owner: AbstractBaseUser, artifact_id: int
) -> tuple[str, str, bytes] | None:
    """Any artifact of the owner's as a file: its name, media type and bytes (an attached
    file's as it was stored, anything else its text in UTF-8); None for another owner's.
    A ``.md`` document saved as plain text is Markdown, and is named so."""
    if not is_row_id(artifact_id):
        return None
    artifact = Artifact.objects.filter(_reachable_artifact(owner, ""), pk=artifact_id).first()
    if artifact is None:
        return None
    stored = AttachmentData.objects.filter(artifact=artifact).first()
    data = bytes(stored.data) if stored else artifact.content.encode("utf-8")
    mime = artifact.mime_type.split(";")[0].strip() or "text/plain"
    title = artifact.title.strip() or f"document-{artifact.pk}"
    if mime == "text/plain" and title.lower().endswith(".md"):
        mime = "text/markdown"
    extension = _EXTENSIONS.get(mime)
    if not stored and extension and "." not in title.rsplit("/", 1)[-1]:
        title += extension
    return title, mime, data


def agent_groups(*, owner: AbstractBaseUser, agent: Agent) -> QuerySet[Group]:
    return Group.objects.filter(
        owner=owner, deleted_at__isnull=True, memberships__agent=agent
    ).order_by("name", "id")


# What a group's state on the roster is called, by its request's state.
ROSTER_STATES = {
    GroupRequest.State.RUNNING: "working",
    GroupRequest.State.SYNTHESIZING: "working",
    GroupRequest.State.AWAITING_APPROVAL: "approval",
}


def group_states(*, group_ids: list[int]) -> dict[int, str]:
    """Each group's state on the roster — ``working``, ``approval`` (waiting for the owner)
    or ``failed`` (its last request ended so) — from its active request, else its latest
    finished one; a group with none of these is left out. One query, whatever the roster."""
    requests = GroupRequest.objects.filter(group_id=OuterRef("pk"))
    rows = Group.objects.filter(pk__in=group_ids).annotate(
        active=Subquery(requests.filter(state__in=GroupRequest.ACTIVE_STATES).values("state")[:1]),
        last=Subquery(
            requests.filter(state__in=GroupRequest.FINISHED_STATES)
            .order_by("-finished_at", "-id")
            .values("state")[:1]
        ),
    )
    states = {}
    for group_id, active, last in rows.values_list("pk", "active", "last"):
        if active:
            states[group_id] = ROSTER_STATES.get(active, "working")
        elif last == GroupRequest.State.FAILED:
            states[group_id] = "failed"
    return states


def canvas_versions(artifacts: Iterable[Artifact]) -> list[Artifact]:
    """The Canvas's entries, newest first: documents of one title are one entry, the newest
    version with the earlier ones under it (``version`` counts them: a second write of
    "Savings plan" is version 2; ``earlier`` lists the versions before it, newest first).
    Files the owner attached are each their own entry."""
    entries: list[Artifact] = []
    by_title: dict[str, Artifact] = {}
    for artifact in artifacts:  # newest first
        artifact.earlier = []
        key = None if artifact.attached else artifact.title
        if key is not None and key in by_title:
            by_title[key].earlier.append(artifact)
            continue
        if key is not None:
            by_title[key] = artifact
        entries.append(artifact)
    for entry in entries:
        entry.version = len(entry.earlier) + 1
        entry.versioned = bool(entry.earlier)
        for n, older in enumerate(entry.earlier):
            older.version, older.versioned, older.earlier = entry.version - 1 - n, True, []
    return entries


def agent_states(*, owner: AbstractBaseUser) -> dict[int, str]:
    """Each of the owner's agents that needs a look on the roster: ``approval`` (an action of
    its waits for the owner) or ``working`` (its model call is out now, in one of the owner's
    groups). Two queries."""
    states = {
        agent_id: "working"
        for agent_id in GroupRequest.objects.filter(
            group__owner=owner,
            state__in=[GroupRequest.State.RUNNING, GroupRequest.State.SYNTHESIZING],
            working_agent__isnull=False,
            working_fence=F("fence"),
            completed_fence__lt=F("fence"),
        ).values_list("working_agent_id", flat=True)
    }
    for agent_id in Approval.objects.filter(
        owner=owner, status=Approval.Status.PENDING
    ).values_list("agent_id", flat=True):
        states[agent_id] = "approval"
    return states


def approval_by_annotations(annotations: dict[str, Any]) -> str:
    """What an MCP tool without a policy of its own ("annotations") does, in words."""
    if not asks_by_annotations(annotations):
        return "reads only: runs without approval"
    if annotations.get("destructiveHint") is True:
        return "may destroy things: asks first"
    return "may change things: asks first"


def mcp_servers(*, owner: AbstractBaseUser) -> list[dict[str, Any]]:
    """The MCP servers ``owner`` may use, its own first (``servers_offered``), each tool with
    its hints as badges (``read_only``, ``destructive``) and its default approval in words."""
    servers = servers_offered(owner=owner)
    for server in servers:
        for tool in server["tools"]:
            hints = tool.get("annotations") or {}
            tool["read_only"] = hints.get("readOnlyHint") is True
            tool["destructive"] = hints.get("destructiveHint") is True
            tool["by_default"] = approval_by_annotations(hints)
    return servers
