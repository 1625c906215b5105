"""Reads of a room's history for an export: a group's every thread or one 1:1 conversation,
the turns a page at a time (by seq, never a server-side cursor, which a transaction pooler
loses), each thread's requests and approvals, and the artifacts its turns refer to. Reads only;
a history whose stored turns already pass the cap is refused before any turn is read."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q
from django.utils import timezone

from garden.models import Agent, Artifact, Conversation, Message
from groups.export.records import (
    ApprovalRecord,
    ArtifactRecord,
    ArtifactRefRecord,
    ConversationRecord,
    ExportRecord,
    RequestRecord,
    Speaker,
    ToolCallRecord,
    ToolResultRecord,
    TurnRecord,
    export_too_large,
)
from groups.models import Approval, Group, GroupRequest

# Turns read per query: a page's content is held while it is written, then let go.
EXPORT_PAGE = 200

_TURN_FIELDS = (
    "id",
    "seq",
    "speaker_kind",
    "speaker_agent_id",
    "kind",
    "content",
    "request_id",
    "addressed_agent_id",
    "created_at",
    "author_id",
)


def person_name(user: Any) -> str:
    """How a person is named in an export: as the dashboard names them."""
    return user.get_short_name() or user.get_username()


class _Reader:
    """One export's reads: the owner's agents' names once, each thread's turns in pages, and
    the artifact ids the turns refer to, gathered as they are read."""

    def __init__(self, owner: AbstractBaseUser) -> None:
        self.owner = owner
        self.owner_name = person_name(owner)
        self.agents = {
            pk: Speaker(kind="agent", name=name, agent_id=pk, handle=handle)
            for pk, handle, name in Agent.objects.filter(owner=owner).values_list(
                "pk", "handle", "name"
            )
        }
        self.referenced: set[int] = set()
        # The names of the people who said turns, when someone other than the owner did (a
        # room of a team workspace), read once each.
        self.people: dict[int, str] = {owner.pk: self.owner_name}

    def agent(self, agent_id: int) -> Speaker:
        return self.agents.get(agent_id) or Speaker(
            kind="agent", name=f"Agent {agent_id}", agent_id=agent_id
        )

    def person(self, user_id: int) -> str:
        if user_id not in self.people:
            user = get_user_model().objects.filter(pk=user_id).first()
            self.people[user_id] = person_name(user) if user else "A former member"
        return self.people[user_id]

    def speaker(self, kind: str, agent_id: int | None, author_id: int | None = None) -> Speaker:
        if agent_id is not None:
            return self.agent(agent_id)
        if kind == Message.SpeakerKind.OWNER:
            name = self.person(author_id) if author_id else self.owner_name
            return Speaker(kind=kind, name=name)
        return Speaker(kind=kind, name="garden")

    def turn(self, row: dict[str, Any]) -> TurnRecord:
        texts, calls, results, refs = [], [], [], []
        for block in row["content"] if isinstance(row["content"], list) else ():
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "tool_call":
                arguments = block.get("arguments")
                calls.append(
                    ToolCallRecord(
                        id=str(block.get("id", "")),
                        name=str(block.get("name", "")),
                        arguments=arguments if isinstance(arguments, dict) else {},
                    )
                )
            elif kind == "tool_result":
                results.append(
                    ToolResultRecord(
                        call_id=str(block.get("call_id", "")),
                        content=str(block.get("content", "")),
                        is_error=bool(block.get("is_error", False)),
                    )
                )
            elif kind == "artifact_ref":
                ref = ArtifactRefRecord(
                    artifact_id=str(block.get("artifact_id", "")),
                    kind=str(block.get("kind", "document")),
                    title=str(block.get("title", "")),
                )
                refs.append(ref)
                if ref.artifact_id.isdigit():
                    self.referenced.add(int(ref.artifact_id))
        return TurnRecord(
            id=row["id"],
            seq=row["seq"],
            at=row["created_at"],
            kind=row["kind"],
            speaker=self.speaker(row["speaker_kind"], row["speaker_agent_id"], row["author_id"]),
            text="\n".join(texts),
            tool_calls=tuple(calls),
            tool_results=tuple(results),
            artifacts=tuple(refs),
            request_id=row["request_id"],
            addressed_agent_id=row["addressed_agent_id"],
        )

    def turns(self, conversation_id: int) -> Iterator[TurnRecord]:
        after = 0
        while True:
            page = list(
                Message.objects.filter(conversation_id=conversation_id, seq__gt=after)
                .order_by("seq")
                .values(*_TURN_FIELDS)[:EXPORT_PAGE]
            )
            for row in page:
                yield self.turn(row)
            if len(page) < EXPORT_PAGE:
                return
            after = page[-1]["seq"]

    def requests(self, conversation_id: int) -> tuple[RequestRecord, ...]:
        rows = GroupRequest.objects.filter(conversation_id=conversation_id).order_by("id")
        return tuple(
            RequestRecord(
                id=r["id"],
                state=r["state"],
                source=r["source"],
                outcome_code=r["outcome_code"],
                outcome=r["outcome"],
                created_at=r["created_at"],
                started_at=r["started_at"],
                finished_at=r["finished_at"],
            )
            for r in rows.values(
                "id",
                "state",
                "source",
                "outcome_code",
                "outcome",
                "created_at",
                "started_at",
                "finished_at",
            )
        )

    def approvals(self, conversation_id: int) -> tuple[ApprovalRecord, ...]:
        rows = Approval.objects.filter(owner=self.owner, conversation_id=conversation_id)
        out = []
        for a in rows.select_related("decided_by").order_by("id"):
            action = a.action if isinstance(a.action, dict) else {}
            arguments = action.get("arguments")
            out.append(
                ApprovalRecord(
                    id=a.pk,
                    tool_call_id=a.tool_call_id,
                    request_id=a.request_id,
                    agent=self.agent(a.agent_id),
                    action_name=str(action.get("name", "")),
                    arguments=arguments if isinstance(arguments, dict) else {},
                    approved_arguments=a.approved_arguments,
                    status=a.status,
                    decided_by=person_name(a.decided_by) if a.decided_by else None,
                    surface=a.surface,
                    reason=a.reason,
                    created_at=a.created_at,
                    decided_at=a.decided_at,
                    executed_at=a.executed_at,
                )
            )
        return tuple(out)

    def conversations(self, threads: list[Conversation]) -> Iterator[ConversationRecord]:
        for thread in threads:
            yield ConversationRecord(
                id=thread.pk,
                title=thread.title,
                status=thread.status,
                created_at=thread.created_at,
                closed_at=thread.closed_at,
                carried_summary=thread.carried_summary,
                requests=self.requests(thread.pk),
                approvals=self.approvals(thread.pk),
                turns=self.turns(thread.pk),
            )

    def artifacts(self, threads: Iterable[int]) -> list[ArtifactRecord]:
        """The owner's artifacts made in these threads or referred to by their turns, without
        their contents."""
        rows = Artifact.objects.filter(
            Q(conversation_id__in=list(threads)) | Q(pk__in=sorted(self.referenced)),
            owner=self.owner,
        ).order_by("id")
        return [
            ArtifactRecord(
                id=r["id"],
                kind=r["kind"],
                title=r["title"],
                mime_type=r["mime_type"],
                size=r["size"],
                conversation_id=r["conversation_id"],
                agent_id=r["agent_id"],
                created_at=r["created_at"],
            )
            for r in rows.values(
                "id",
                "kind",
                "title",
                "mime_type",
                "size",
                "conversation_id",
                "agent_id",
                "created_at",
            )
        ]


def _within_cap(threads: list[Conversation]) -> None:
    """EXPORT_TOO_LARGE before any turn is read, when the threads' stored turns alone pass
    GARDEN_EXPORT_MAX_BYTES (the document, written, is capped again as it grows)."""
    limit = settings.GARDEN_EXPORT_MAX_BYTES
    if sum(t.stored_bytes for t in threads) > limit:
        raise export_too_large(limit)


def _export(
    *,
    owner: AbstractBaseUser,
    scope: str,
    title: str,
    threads: list[Conversation],
    members: tuple[Speaker, ...],
    group_id: int | None = None,
    agent: Speaker | None = None,
) -> ExportRecord:
    _within_cap(threads)
    reader = _Reader(owner)
    return ExportRecord(
        scope=scope,
        title=title,
        exported_at=timezone.now(),
        owner=reader.owner_name,
        group_id=group_id,
        agent=agent,
        members=members,
        conversations=reader.conversations(threads),
        artifacts=lambda: reader.artifacts(t.pk for t in threads),
    )


def group_history_export(*, owner: AbstractBaseUser, group: Group) -> ExportRecord:
    """Every thread of ``group`` (oldest first), as an export read while it is written."""
    threads = list(Conversation.objects.filter(group=group, owner=owner).order_by("id"))
    members = tuple(
        Speaker(kind="agent", name=m.agent.name, agent_id=m.agent_id, handle=m.agent.handle)
        for m in getattr(group, "ordered_memberships", None)
        or group.memberships.select_related("agent").order_by("position", "id")
    )
    return _export(
        owner=owner,
        scope="group",
        title=group.name,
        threads=threads,
        members=members,
        group_id=group.pk,
    )


def conversation_export(*, owner: AbstractBaseUser, conversation: Conversation) -> ExportRecord:
    """One 1:1 conversation with its agent, as an export read while it is written."""
    agent = conversation.agent
    face = Speaker(kind="agent", name=agent.name, agent_id=agent.pk, handle=agent.handle)
    return _export(
        owner=owner,
        scope="conversation",
        title=conversation.title or f"Conversation with {agent.name}",
        threads=[conversation],
        members=(face,),
        agent=face,
    )
