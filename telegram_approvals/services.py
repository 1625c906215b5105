"""Writes of the Telegram surface: linking an owner's chat with a one-time code, sending a
pending approval there and keeping its message up to date, and handling what the bot
receives (``/start <code>``, a button press) — a press decides through the one decide path,
``groups.services.approvals.approval_decide``.

No transaction here is open across a Bot API call: calls happen after the writes they follow
have committed (the tasks and the poll command make them).
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac
from telegram import CallbackQuery, Message, Update
from telegram.error import BadRequest, Forbidden

from garden.errors import ServiceError
from groups.models import Approval
from groups.payloads import approval_label
from groups.services.approvals import approval_decide
from telegram_approvals import scheduling
from telegram_approvals.bot import BotApi, configured
from telegram_approvals.models import TelegramApprovalMessage, TelegramLink, TelegramLinkCode
from telegram_approvals.render import (
    ApprovalView,
    already_decided,
    parse_callback,
    render,
)

log = logging.getLogger(__name__)

# Codes are read off a screen and typed or tapped: no 0/O or 1/I/L to confuse.
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 10
# A claim on sending an approval's message older than this was left by a worker that died.
STALE_CLAIM = timedelta(minutes=2)
# Approvals still pending when a chat is linked are sent there too, the newest this many.
SEND_ON_LINK = 20

HELP = (
    "This bot sends garden approvals. Link this chat from the dashboard's Telegram page: it "
    "shows a code to send here as /start <code>."
)
INVALID_CODE = "That code is not valid or has expired. Get a new one from the dashboard."
NOT_YOURS = "Not yours: this approval belongs to another garden account, so nothing was decided."
NOT_LINKED = "Not yours: this chat is not linked to garden, so nothing was decided."
PRIVATE_ONLY = "Link garden from a private chat with the bot, not from a group."
CHAT_TAKEN = (
    "This chat is already linked to another garden account. Unlink it there first, then use a "
    "new code."
)


@dataclass(frozen=True)
class LinkCode:
    code: str
    expires_at: datetime


def _code_hash(code: str) -> str:
    return salted_hmac("telegram_approvals.link_code", code.strip().upper()).hexdigest()


def link_code_create(*, owner: AbstractBaseUser) -> LinkCode:
    """A new code for ``owner`` to send the bot as ``/start <code>``: good for
    GARDEN_TELEGRAM_LINK_CODE_SECONDS, once; it replaces any earlier unused code. Only its
    keyed hash is stored."""
    code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    expires_at = timezone.now() + timedelta(seconds=settings.GARDEN_TELEGRAM_LINK_CODE_SECONDS)
    with transaction.atomic():
        TelegramLinkCode.objects.filter(owner=owner, used_at__isnull=True).delete()
        TelegramLinkCode.objects.create(
            owner=owner, code_hash=_code_hash(code), expires_at=expires_at
        )
    return LinkCode(code=code, expires_at=expires_at)


def link_delete(*, owner: AbstractBaseUser) -> bool:
    """Unlink the owner's chat; whether there was one. Approvals stop going there, and a press
    on an earlier message from it decides nothing."""
    deleted, _ = TelegramLink.objects.filter(owner=owner).delete()
    return bool(deleted)


def link_redeem(
    *, code: str, chat_id: int, chat_type: str, telegram_user_id: int, username: str = ""
) -> str:
    """Link the chat that sent ``/start <code>`` to the code's owner; the bot's answer.

    The code is claimed by a conditional update, so it links once however often it arrives;
    an expired, used or unknown code links nothing. One chat per owner (a new link replaces
    the old) and one owner per chat (a chat linked elsewhere is refused, its code unspent).
    """
    if chat_type != "private":
        return PRIVATE_ONLY
    now = timezone.now()
    usable = TelegramLinkCode.objects.filter(
        code_hash=_code_hash(code), used_at__isnull=True, expires_at__gt=now
    )
    with transaction.atomic():
        owner_id = usable.values_list("owner_id", flat=True).first()
        if owner_id is None:
            return INVALID_CODE
        if TelegramLink.objects.filter(chat_id=chat_id).exclude(owner_id=owner_id).exists():
            return CHAT_TAKEN
        if not usable.update(used_at=now):
            return INVALID_CODE
        try:
            with transaction.atomic():
                TelegramLink.objects.update_or_create(
                    owner_id=owner_id,
                    defaults={
                        "chat_id": chat_id,
                        "telegram_user_id": telegram_user_id,
                        "username": (username or "")[:64],
                        "linked_at": now,
                    },
                )
        except IntegrityError:  # the chat was linked elsewhere meanwhile
            transaction.set_rollback(True)
            return CHAT_TAKEN
        pending = list(
            Approval.objects.filter(owner_id=owner_id, status=Approval.Status.PENDING)
            .order_by("-pk")
            .values_list("pk", flat=True)[:SEND_ON_LINK]
        )
        # Sent to a chat linked before this one: sent again here (the old chat's buttons now
        # answer that it is not linked).
        TelegramApprovalMessage.objects.filter(approval_id__in=pending).exclude(
            chat_id=chat_id
        ).delete()
        transaction.on_commit(lambda: scheduling.sync_approvals(pending))
    return (
        "Linked. garden will send your group approvals here, with Approve and Reject buttons. "
        "Unlink from the dashboard's Telegram page."
    )


# --- an approval's message ------------------------------------------------------------------


def approval_view(approval: Approval) -> ApprovalView:
    request = approval.request
    return ApprovalView(
        approval_id=approval.pk,
        label=approval_label(approval),
        # An agent's own room says nothing more: the label names the agent already.
        group=request.group.name if request is not None and not request.group.is_solo else "",
        arguments=(approval.action or {}).get("arguments") or {},
        status=approval.status,
        surface=approval.surface,
        reason=approval.reason,
        executed=approval.executed_at is not None,
        changed=approval.approved_arguments is not None,
        by_owner=approval.decided_by_id in (None, approval.owner_id),
        decider=approval.decided_by.get_username() if approval.decided_by else "",
    )


def _approval(approval_id: int) -> Approval | None:
    return (
        Approval.objects.select_related("agent", "request__group", "decided_by")
        .filter(pk=approval_id)
        .first()
    )


def _claim(approval: Approval, chat_id: int) -> TelegramApprovalMessage | None:
    """The right to send ``approval``'s message: one worker gets it (the row is unique per
    approval); a claim left by a worker that died is taken over."""
    now = timezone.now()
    try:
        with transaction.atomic():
            return TelegramApprovalMessage.objects.create(
                approval=approval, chat_id=chat_id, claimed_at=now
            )
    except IntegrityError:
        pass
    taken = TelegramApprovalMessage.objects.filter(
        approval=approval, message_id__isnull=True, claimed_at__lt=now - STALE_CLAIM
    ).update(chat_id=chat_id, claimed_at=now)
    return TelegramApprovalMessage.objects.get(approval=approval) if taken else None


def approval_message_sync(*, approval_id: int, api: BotApi | None = None) -> str:
    """Bring the owner's Telegram copy of an approval up to date; what was done.

    A pending approval not yet sent is sent to the owner's linked chat with Approve / Reject
    buttons (its message id kept); a sent one whose state now reads differently is edited to
    say so, its buttons gone once decided. Idempotent: a second call finds it up to date.
    Raises python-telegram-bot's errors for the task to retry (after releasing its claim).
    """
    if not configured():
        return "not_configured"
    approval = _approval(approval_id)
    if approval is None:
        return "gone"
    message = TelegramApprovalMessage.objects.filter(approval_id=approval_id).first()
    if message is None or (message.message_id is None and message.claimed_at < _stale()):
        if approval.status != Approval.Status.PENDING:
            return "decided_before_sent"
        # A deactivated account's chat is sent nothing more.
        link = TelegramLink.objects.filter(
            owner_id=approval.owner_id, owner__is_active=True
        ).first()
        if link is None:
            return "not_linked"
        message = _claim(approval, link.chat_id)
        if message is None:
            return "being_sent"
        api = api or BotApi()
        shown = render(approval_view(approval))
        try:
            message_id = api.send_message(
                chat_id=link.chat_id, text=shown.text, buttons=shown.buttons
            )
        except Exception:
            # Nothing was shown (or we cannot know it was): let a retry send it.
            TelegramApprovalMessage.objects.filter(pk=message.pk, message_id__isnull=True).delete()
            raise
        TelegramApprovalMessage.objects.filter(pk=message.pk).update(
            message_id=message_id, text=shown.text
        )
        message.message_id, message.text = message_id, shown.text
        done = "sent"
    elif message.message_id is None:
        return "being_sent"  # the sender brings it up to date after sending
    else:
        done = "up_to_date"
    return _edit_until_current(message, api, done)


def _stale() -> datetime:
    return timezone.now() - STALE_CLAIM


def _edit_until_current(message: TelegramApprovalMessage, api: BotApi | None, done: str) -> str:
    """Edit the message until it says what the approval's state says now. Another worker may
    be editing it too: re-reading after each edit means the last to finish leaves it current."""
    for _ in range(3):
        approval = _approval(message.approval_id)
        if approval is None:
            return done
        shown = render(approval_view(approval))
        if shown.text == message.text:
            return done
        if not TelegramLink.objects.filter(
            owner_id=approval.owner_id, chat_id=message.chat_id
        ).exists():
            return "unlinked"
        api = api or BotApi()
        try:
            api.edit_message_text(
                chat_id=message.chat_id,
                message_id=message.message_id,
                text=shown.text,
                buttons=shown.buttons,
            )
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():
                log.warning("approval %s: Telegram refused the edit: %s", approval.pk, exc)
                return "edit_refused"
        except Forbidden:
            return "blocked"  # the person blocked the bot
        TelegramApprovalMessage.objects.filter(pk=message.pk).update(text=shown.text)
        message.text = shown.text
        done = "edited"
    return done


# --- what the bot receives ------------------------------------------------------------------

Reply = dict[str, Any]


def update_handle(*, update: Update) -> list[Reply]:
    """Handle one update from Telegram (webhook or poll); the Bot API calls that answer it,
    for the caller to make after this returns (``replies_deliver``). An update seen before
    (Telegram redelivers one it thinks unanswered) is answered once."""
    seen = f"telegram-update:{update.update_id}"
    if not cache.add(seen, 1, timeout=24 * 3600):
        return []
    try:
        if update.callback_query is not None:
            return callback_handle(query=update.callback_query)
        if update.message is not None and update.message.text:
            return [_say(update.message.chat.id, _command(update.message))]
        return []
    except Exception:
        cache.delete(seen)  # not handled: Telegram's redelivery is handled afresh
        raise


def _say(chat_id: int, text: str) -> Reply:
    return {"method": "sendMessage", "chat_id": chat_id, "text": text}


def _command(message: Message) -> str:
    words = message.text.split()
    # "/start CODE", or "/start@garden_bot CODE" from a client that names the bot.
    if words and words[0].split("@", 1)[0] == "/start":
        if len(words) < 2:
            return HELP
        sender = message.from_user
        return link_redeem(
            code=words[1],
            chat_id=message.chat.id,
            chat_type=message.chat.type,
            telegram_user_id=sender.id if sender else message.chat.id,
            username=(sender.username or "") if sender else "",
        )
    return HELP


def callback_handle(*, query: CallbackQuery) -> list[Reply]:
    """A press of Approve or Reject. Only the linked chat of the approval's owner, pressed by
    the linked person, decides, and it decides through ``approval_decide`` (surface
    ``telegram``): exactly once, a conflicting or late press is told it was already decided.
    The press is answered; the message is edited by the approval's sync."""

    def answer(text: str) -> list[Reply]:
        return [{"method": "answerCallbackQuery", "callback_query_id": query.id, "text": text}]

    parsed = parse_callback(query.data)
    if parsed is None:
        return answer("That button is not one of garden's.")
    approval_id, decision = parsed
    chat_id = query.message.chat.id if query.message is not None else None
    link = (
        TelegramLink.objects.select_related("owner")
        # A deactivated account decides nothing, here as with a token or a session.
        .filter(chat_id=chat_id, telegram_user_id=query.from_user.id, owner__is_active=True)
        .first()
    )
    if link is None:
        return answer(NOT_LINKED)
    if not Approval.objects.filter(pk=approval_id, owner_id=link.owner_id).exists():
        return answer(NOT_YOURS)
    try:
        made = approval_decide(
            user=link.owner, approval_id=approval_id, decision=decision, surface="telegram"
        )
    except ServiceError as exc:
        if exc.status != 409:
            return answer(NOT_YOURS if exc.status == 404 else exc.message)
        # Decided elsewhere, or stopped: make sure the message says so too.
        scheduling.sync_approvals([approval_id])
        return answer(already_decided(approval_view(_approval(approval_id))))
    if made.repeated:
        scheduling.sync_approvals([approval_id])
        return answer(already_decided(approval_view(_approval(approval_id))))
    if decision == "approve":
        return answer("Approved — running it now.")
    return answer("Rejected; it will not run.")


def replies_deliver(*, replies: list[Reply], api: BotApi | None = None) -> int:
    """Make the Bot API calls ``update_handle`` returned; how many went through. One that
    fails is logged and skipped: an answer to a press is worth nothing minutes later."""
    if not replies:
        return 0
    api = api or BotApi()
    made = 0
    for reply in replies:
        try:
            if reply["method"] == "answerCallbackQuery":
                api.answer_callback_query(
                    callback_query_id=reply["callback_query_id"], text=reply["text"]
                )
            elif reply["method"] == "sendMessage":
                api.send_message(chat_id=reply["chat_id"], text=reply["text"])
            else:
                continue
        except Exception as exc:  # a reply is best effort; the next one may still go
            log.warning("Telegram %s not delivered: %s", reply["method"], exc)
            continue
        made += 1
    return made
