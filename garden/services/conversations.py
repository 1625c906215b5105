"""Writes for conversations and their messages; the only place a turn's seq is assigned."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from garden import events, statements
from garden.errors import ServiceError
from garden.models import Agent, Conversation, Message
from garden.payloads import message_created_event
from garden.selectors import conversation_summaries
from garden.statements import RowUpdate
from garden.storage import turn_bytes


def conversation_create(
    *,
    owner: AbstractBaseUser,
    agent: Agent | None = None,
    group: Any = None,
    title: str = "",
    carried_summary: str = "",
) -> Conversation:
    conversation = Conversation.objects.create(
        owner=owner,
        agent=agent,
        group=group,
        title=title,
        carried_summary=carried_summary,
    )
    return conversation


# A conversation's title is a line in a list, not a text: as long as a group's name.
TITLE_MAX_CHARS = 100


def conversation_title_check(title: str) -> str:
    """``title`` as it is kept (trimmed; blank means untitled), or a named refusal."""
    title = title.strip()
    if len(title) > TITLE_MAX_CHARS:
        raise ServiceError(
            "TITLE_TOO_LONG",
            f"A conversation's title has at most {TITLE_MAX_CHARS} characters.",
            field="title",
        )
    if any(not ch.isprintable() for ch in title):
        raise ServiceError(
            "TITLE_INVALID",
            "A title is one line of text, without control characters.",
            field="title",
        )
    return title


def agent_conversation_create(
    *, owner: AbstractBaseUser, agent: Agent, title: str = ""
) -> Conversation:
    """A new 1:1 conversation with ``agent``: its room lists it first and shows it."""
    return conversation_create(owner=owner, agent=agent, title=conversation_title_check(title))


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    """Give ``conversation`` a new title (blank: untitled, shown by its first words)."""
    conversation.title = conversation_title_check(title)
    Conversation.objects.filter(pk=conversation.pk).update(title=conversation.title)
    return conversation


def agent_conversation_open(*, owner: AbstractBaseUser, agent: Agent) -> Conversation:
    """The owner's open 1:1 conversation with ``agent`` spoken in last (or started last) — the
    one its room shows unless asked for another — made on first use (under the agent's row, so
    two first visits make one)."""
    threads = conversation_summaries(owner=owner, agent_id=agent.pk).filter(
        status=Conversation.Status.OPEN
    )
    found = threads.first()
    if found is not None:
        return found
    with transaction.atomic():
        Agent.objects.select_for_update(no_key=True).filter(pk=agent.pk).first()
        return threads.first() or conversation_create(owner=owner, agent=agent)


def message_append(
    *,
    conversation_id: int,
    speaker_kind: str,
    content: list[dict[str, Any]],
    speaker_agent: Agent | None = None,
    kind: str = Message.Kind.TURN,
    request_id: int | None = None,
    in_reply_to: Message | None = None,
    addressed_agent: Agent | None = None,
    reply_to_call_id: str = "",
    step: int | None = None,
    stopped_at: datetime | None = None,
    channel: str | None = None,
    author: AbstractBaseUser | None = None,
) -> Message:
    """Append one turn with the next seq and push it after commit.

    ``channel`` overrides the event channel (groups push to the group's channel); ``author``
    is the signed-in person who said an owner turn (trusted metadata, never from text).
    """
    message = Message(
        conversation_id=conversation_id,
        speaker_kind=speaker_kind,
        speaker_agent=speaker_agent,
        kind=kind,
        content=content,
        request_id=request_id,
        in_reply_to=in_reply_to,
        addressed_agent=addressed_agent,
        reply_to_call_id=reply_to_call_id,
        step=step,
        stopped_at=stopped_at,
        author=author,
    )
    return messages_append(conversation_id=conversation_id, messages=[message], channel=channel)[0]


def messages_append(
    *,
    conversation_id: int,
    messages: list[Message],
    channel: str | None = None,
    also: RowUpdate | None = None,
) -> list[Message]:
    """Append unsaved ``messages`` in order with consecutive seqs and push them after commit:
    one UPDATE takes the seqs, one INSERT writes the turns, however many there are (on
    PostgreSQL both in one statement; garden/statements.py ``insert_turns``).

    The UPDATE takes the conversation row's lock until commit, so concurrent appends
    serialise and seqs never collide or leave gaps. ``also`` is one more row of the caller's
    to update, written in the same transaction: on PostgreSQL in the same statement,
    elsewhere just before.
    """
    if not messages:
        return []
    # No savepoint: callers batch several writes in one transaction, and a failed append
    # fails the caller's whole transaction anyway.
    with transaction.atomic(savepoint=False):
        statements.insert_turns(
            conversation_id=conversation_id,
            messages=messages,
            stored=stored_bytes_of(messages),
            also=also,
        )
        channel = channel or events.conversation_channel(conversation_id)
        for message in messages:
            events.send_event_on_commit(channel=channel, event=message_created_event(message))
    return messages


def stored_bytes_of(messages: list[Message]) -> int:
    """The bytes ``messages`` add to their thread's count (garden/storage.py)."""
    return sum(turn_bytes(m.content) for m in messages)


def messages_move(*, request_id: int, from_conversation_id: int, to_conversation_id: int) -> int:
    """Move a request's turns to another thread, in their order, each taking the next seq
    there; returns how many. Caller holds both threads' group."""
    rows = list(
        Message.objects.filter(request_id=request_id, conversation_id=from_conversation_id)
        .order_by("seq")
        .values_list("pk", "content")
    )
    ids = [pk for pk, _ in rows]
    if ids:
        # Their bytes move with them, so each thread's count stays its turns' (storage).
        moved = sum(turn_bytes(content) for _, content in rows)
        Conversation.objects.filter(pk=from_conversation_id).update(
            stored_bytes=F("stored_bytes") - moved
        )
        last = statements.take_seqs(
            conversation_id=to_conversation_id, count=len(ids), stored=moved
        )
        for seq, pk in enumerate(ids, start=last - len(ids) + 1):
            Message.objects.filter(pk=pk).update(conversation_id=to_conversation_id, seq=seq)
    return len(ids)


def conversation_close(*, conversation: Conversation) -> None:
    conversation.status = Conversation.Status.CLOSED
    conversation.closed_at = timezone.now()
    conversation.save(update_fields=["status", "closed_at"])


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}
