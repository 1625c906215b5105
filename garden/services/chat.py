"""The 1:1 path: a person posts to an agent's conversation; one model call answers it.

This is the walking skeleton the group loop reuses: transcript → neutral request → the
agent's own provider (outside any transaction) → the reply stored under the agent.
"""

from __future__ import annotations

import logging
import time

from celery import signature
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from garden.budgets import DAY, budget_check, budget_spend
from garden.chat_signals import chat_replied
from garden.errors import QuotaExceeded, ServiceError
from garden.models import Conversation, Message
from garden.providers import (
    ChatMessage,
    ChatRequest,
    ConfirmedRejection,
    ProviderError,
    TextBlock,
    get_provider,
)
from garden.quotas import quota_hold
from garden.retry import retry_on_lock_conflict
from garden.selectors import account_config
from garden.services.conversations import message_append, text_block
from garden.slots import call_slot
from garden.storage import storage_hold
from garden.transcript import blocks_from_json, blocks_to_json

log = logging.getLogger(__name__)


class CallSlotsBusy(Exception):
    """Every model-call slot of the owner is in use; the reply is tried again shortly."""


class ReplyLater(Exception):
    """The provider refused the call before any work (a 429, say): the reply is tried again
    as ``attempt`` after ``countdown`` seconds — by a later delivery, never by sleeping in
    the worker. ``first_at`` is when the first attempt went out (the retry ceiling's start)."""

    def __init__(
        self, *, countdown: float, attempt: int, first_at: float | None, code: str
    ) -> None:
        super().__init__(f"{code}: try again in {countdown:.1f}s as attempt {attempt}")
        self.countdown, self.attempt, self.first_at = countdown, attempt, first_at


# The task that writes the agent's reply (garden.tasks), sent by name after commit.
CHAT_REPLY_TASK = "garden.chat_reply"


@retry_on_lock_conflict
def conversation_post_owner_message(
    *, owner: AbstractBaseUser, conversation: Conversation, text: str
) -> Message:
    """Store the owner's turn and enqueue the agent's reply after commit."""
    text = text.strip()
    if not text:
        raise ServiceError("EMPTY_CONTENT", "The message is empty.", field="text")
    if conversation.owner_id != owner.pk or conversation.agent_id is None:
        raise ServiceError("CONVERSATION_NOT_FOUND", "No such conversation.", field="conversation")
    if conversation.status != Conversation.Status.OPEN:
        raise ServiceError(
            "CONVERSATION_CLOSED", "This conversation is closed.", field="conversation"
        )
    if not conversation.agent.can_run:
        raise ServiceError(
            "AGENT_CANNOT_RUN", "This agent has no model or was removed.", field="conversation"
        )
    # Every owner message of a 1:1 conversation not yet answered (each is answered once:
    # by the agent or by a notice saying why not), however long it has waited.
    waiting = Message.objects.filter(
        conversation__owner_id=owner.pk,
        conversation__agent__isnull=False,
        speaker_kind=Message.SpeakerKind.OWNER,
        replies__isnull=True,
    )
    limit = settings.GARDEN_MAX_QUEUED_PER_OWNER
    with transaction.atomic():
        message = message_append(
            conversation_id=conversation.pk,
            speaker_kind=Message.SpeakerKind.OWNER,
            content=[text_block(text)],
        )
        quota_hold(
            owner_id=owner.pk,
            count=waiting.count,
            limit=limit,
            refusal=lambda: QuotaExceeded(
                "QUEUE_FULL",
                f"You already have {limit} messages waiting for a reply, "
                "the limit on this site; wait for them first.",
                field="text",
                status=429,
            ),
        )
        storage_hold(owner_id=owner.pk, field="text")
        transaction.on_commit(
            lambda: signature(CHAT_REPLY_TASK, kwargs={"message_id": message.pk}).apply_async()
        )
    return message


OMITTED = "[earlier turns of this conversation are omitted: they do not fit the cap]"


def _chars(content: list[dict]) -> int:
    return sum(
        len(str(b.get("text") or b.get("content") or b.get("arguments") or "")) for b in content
    )


def _clipped(content: list[dict], keep: int) -> list[dict]:
    """``content`` with each text and tool result cut to ``keep`` characters, marked."""
    out = []
    for block in content:
        field = "text" if block.get("type") == "text" else "content"
        value = block.get(field)
        if isinstance(value, str) and len(value) > keep:
            block = {**block, field: f"{value[:keep]} [clipped {len(value) - keep:,} characters]"}
        out.append(block)
    return out


def _request_for(conversation: Conversation, upto_seq: int) -> ChatRequest:
    """The agent's view of its 1:1 conversation, bounded before every call like a group room:
    the newest turns that fit GARDEN_CHAT_CAP_CHARS, read newest first (at most
    GARDEN_CHAT_MAX_TURNS rows, so a long thread costs what a short one does), a turn larger
    than half the cap clipped, and a marker where older turns were left out."""
    agent = conversation.agent
    cap = settings.GARDEN_CHAT_CAP_CHARS
    budget = max(0, cap - len(agent.instructions))
    rows = (
        conversation.messages.filter(seq__lte=upto_seq)
        .exclude(kind=Message.Kind.ACTIVITY)
        .order_by("-seq")
        .values_list("speaker_kind", "speaker_agent_id", "content")[
            : settings.GARDEN_CHAT_MAX_TURNS + 1
        ]
    )
    picked: list[tuple[str, int | None, list[dict]]] = []
    omitted = False
    for index, (speaker_kind, speaker_agent_id, content) in enumerate(rows):
        if index == settings.GARDEN_CHAT_MAX_TURNS:
            omitted = True
            break
        content = _clipped(content, cap // 2) if _chars(content) > cap // 2 else content
        size = _chars(content)
        if picked and size > budget:
            omitted = True
            break
        budget -= size
        picked.append((speaker_kind, speaker_agent_id, content))
    picked.reverse()
    messages: list[ChatMessage] = []
    if omitted:
        messages.append(ChatMessage("user", (TextBlock(OMITTED),)))
    for speaker_kind, speaker_agent_id, content in picked:
        if speaker_kind == Message.SpeakerKind.AGENT and speaker_agent_id == agent.pk:
            role, blocks = "assistant", blocks_from_json(content)
        elif speaker_kind == Message.SpeakerKind.OWNER:
            role, blocks = "user", blocks_from_json(content)
        else:
            text = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
            role, blocks = "user", (TextBlock(f"garden said: {text}"),)
        if messages and messages[-1].role == role:
            messages[-1] = ChatMessage(role, messages[-1].content + blocks)
        else:
            messages.append(ChatMessage(role, blocks))
    return ChatRequest(system=agent.instructions, messages=tuple(messages))


def _call(
    conversation: Conversation, request: ChatRequest, *, attempt: int, first_at: float
) -> tuple[list[dict], bool]:
    """The agent's model call: its reply's content, or an honest notice's (and True)."""
    agent = conversation.agent
    if not agent.can_run:
        # Its account was taken away (or the agent removed) after the message was sent.
        return [text_block(f"The reply did not come: @{agent.handle} has no model now.")], True
    try:
        with call_slot(owner_id=conversation.owner_id) as free:
            if not free:
                raise CallSlotsBusy(conversation.owner_id)
            reply = get_provider(account_config(agent.model_account)).complete(request)
    except (ReplyLater, CallSlotsBusy):
        raise
    except ConfirmedRejection as exc:
        wait = min(exc.retry_after or 2.0**attempt, 30.0)
        if (
            attempt < settings.GARDEN_PROVIDER_RETRY_ATTEMPTS
            and time.time() + wait - first_at <= settings.GARDEN_PROVIDER_RETRY_SECONDS
        ):
            raise ReplyLater(
                countdown=wait, attempt=attempt + 1, first_at=first_at, code=exc.code
            ) from exc
        return [text_block(f"The reply did not come: the provider refused ({exc.code}).")], True
    except ProviderError as exc:
        return [text_block(f"The reply did not come ({exc.code}).")], True
    except Exception:
        # Whatever went wrong, the owner's message is answered: an unanswered one would count
        # against their queue until someone looked (the log has the rest).
        log.exception("1:1 reply to conversation %s failed", conversation.pk)
        return [text_block("The reply did not come (REPLY_FAILED).")], True
    budget_spend(owner_id=conversation.owner_id, account=agent.model_account, usage=reply.usage)
    return blocks_to_json(reply.content) or [text_block("")], False


def chat_reply(
    *, message_id: int, attempt: int = 1, first_at: float | None = None
) -> Message | None:
    """Answer the owner's turn ``message_id`` once. Idempotent: a second delivery does nothing.

    The model call happens outside any transaction; this is ``attempt`` of at most
    GARDEN_PROVIDER_RETRY_ATTEMPTS, the first made at ``first_at``. A confirmed rejection
    within the retry ceiling (attempts and seconds) raises ReplyLater, having written
    nothing: the task sends itself again after the wait instead of holding the worker;
    past the ceiling, or on anything else, the reply is an honest notice. Raises
    CallSlotsBusy, having written nothing, when the owner's calls in flight are at their cap
    (GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER).
    """
    owner_message = (
        Message.objects.select_related("conversation__agent__model_account")
        .filter(pk=message_id, speaker_kind=Message.SpeakerKind.OWNER)
        .first()
    )
    if owner_message is None or Message.objects.filter(in_reply_to=owner_message).exists():
        return None
    conversation = owner_message.conversation
    agent = conversation.agent
    request = _request_for(conversation, owner_message.seq)
    first_at = first_at or time.time()
    spent = budget_check(owner_id=conversation.owner_id, account=agent.model_account)
    if spent is not None and spent.window != DAY:
        # This minute's budget on the operator's credential is spent: after it, as the same
        # attempt, the retry ceiling's window starting again.
        raise ReplyLater(countdown=spent.retry_in, attempt=attempt, first_at=None, code=spent.code)
    if spent is not None:
        content, failed = [text_block(f"The reply did not come: {spent.message}")], True
    else:
        content, failed = _call(conversation, request, attempt=attempt, first_at=first_at)
    kind = Message.Kind.NOTICE if failed else Message.Kind.TURN
    speaker = Message.SpeakerKind.GARDEN if failed else Message.SpeakerKind.AGENT
    try:
        reply = message_append(
            conversation_id=conversation.pk,
            speaker_kind=speaker,
            speaker_agent=agent if speaker == Message.SpeakerKind.AGENT else None,
            content=content,
            kind=kind,
            in_reply_to=owner_message,
        )
    except IntegrityError:
        # Another delivery answered first; the unique reply constraint kept one answer.
        return Message.objects.filter(in_reply_to=owner_message).first()
    chat_replied.send(sender=Message, message_id=owner_message.pk, reply_id=reply.pk)
    return reply
