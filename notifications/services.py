"""Writes of notifications: an owner's channels and mutes (Settings → Notifications), and the
notices of a request's replies — a ``notification.reply`` event to the owner's open dashboard
pages and a message to their linked Telegram chat, each once per reply.

A reply notifies when its request ends (completed, stopped or failed): every finished reply of
the request, in order, each as the agent that said it. A muted agent's replies notify nothing
anywhere; approvals are not sent from here (``telegram_approvals``) and are never muted."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.db import transaction
from django.urls import reverse
from telegram.error import Forbidden, NetworkError, RetryAfter, TelegramError

from garden import events
from garden.errors import ServiceError, not_found
from garden.models import Agent, Message
from groups.models import Group, GroupRequest
from notifications import scheduling
from notifications.models import AgentMute, NotificationSettings
from notifications.payloads import (
    owner_channel,
    reply_notification_event,
    reply_text,
    telegram_text,
)
from notifications.selectors import channels_get, muted_agent_ids, reply_turns
from telegram_approvals.bot import BotApi, configured
from telegram_approvals.models import TelegramLink

log = logging.getLogger(__name__)

# A notice is claimed in the cache before it goes, so a redelivered task sends it once.
CLAIM_SECONDS = 24 * 3600


# --- settings -------------------------------------------------------------------------------


def check_notification_settings(
    *, owner: AbstractBaseUser, telegram: bool, muted: Iterable[int]
) -> list[int]:
    """The agents to mute, checked: each a live agent of ``owner`` (another owner's, or a
    removed one, is NOT_FOUND on ``muted``); Telegram turned on only with a linked chat
    (TELEGRAM_NOT_LINKED). Reads only."""
    wanted = sorted(set(muted))
    own = set(
        Agent.objects.filter(owner=owner, removed_at__isnull=True, pk__in=wanted).values_list(
            "pk", flat=True
        )
    )
    if len(own) != len(wanted):
        raise not_found("agent", field="muted")
    was_on = NotificationSettings.objects.filter(owner=owner, telegram=True).exists()
    if telegram and not was_on and not TelegramLink.objects.filter(owner=owner).exists():
        raise ServiceError(
            "TELEGRAM_NOT_LINKED",
            "Link a Telegram chat first (Settings → Telegram).",
            field="telegram",
        )
    return wanted


def notification_settings_update(
    *, owner: AbstractBaseUser, browser: bool, telegram: bool, muted: Iterable[int]
) -> None:
    """Replace the owner's channels and mutes: ``muted`` is every agent muted from now on.
    Nothing is written when a check refuses."""
    wanted = check_notification_settings(owner=owner, telegram=telegram, muted=muted)
    with transaction.atomic():
        NotificationSettings.objects.update_or_create(
            owner=owner, defaults={"browser": browser, "telegram": telegram}
        )
        AgentMute.objects.filter(owner=owner).exclude(agent_id__in=wanted).delete()
        AgentMute.objects.bulk_create(
            [AgentMute(owner=owner, agent_id=pk) for pk in wanted], ignore_conflicts=True
        )


# --- a request's replies --------------------------------------------------------------------


def _claim(channel: str, message_id: int) -> bool:
    return cache.add(f"notifications:{channel}:{message_id}", 1, timeout=CLAIM_SECONDS)


def _release(channel: str, message_id: int) -> None:
    cache.delete(f"notifications:{channel}:{message_id}")


def _where(group: Group, conversation_id: int) -> tuple[int | None, str, str]:
    """(group id, group name, room URL) of a turn in ``group``: none of the first two in an
    agent's own room, which is the agent's, opened at the conversation the turn is in (the
    agent has several)."""
    if group.is_solo:
        room = reverse("dashboard:agent_room", kwargs={"agent_id": group.coordinator_id})
        return None, "", f"{room}?conversation={conversation_id}"
    return group.pk, group.name, reverse("dashboard:room", kwargs={"group_id": group.pk})


def replies_notify(*, request_id: int) -> dict[str, Any]:
    """Notify the owner of the finished replies of request ``request_id``: each unmuted one as
    a ``notification.reply`` event on their pages' channel (browser on), and sent to their
    linked chat by ``send_telegram`` (Telegram on). Idempotent: each reply once per channel."""
    request = (
        GroupRequest.objects.select_related("group", "group__owner").filter(pk=request_id).first()
    )
    if request is None or request.group.deleted_at is not None:
        return {"browser": 0, "telegram": 0}
    group, owner = request.group, request.group.owner
    if not owner.is_active:
        return {"browser": 0, "telegram": 0}
    turns = reply_turns(request_id=request_id)
    muted = muted_agent_ids(owner_id=owner.pk) if turns else set()
    turns = [(turn, text) for turn, text in turns if turn.speaker_agent_id not in muted]
    if not turns:
        return {"browser": 0, "telegram": 0}
    chosen = channels_get(owner_id=owner.pk)
    shown = 0
    if chosen.browser:
        group_id, group_name, url = _where(group, request.conversation_id)
        for turn, text in turns:
            if _claim("browser", turn.pk):
                events.send_event_on_commit(
                    channel=owner_channel(owner.pk),
                    event=reply_notification_event(
                        message=turn, text=text, group_id=group_id, group_name=group_name, url=url
                    ),
                )
                shown += 1
    telegram = []
    if chosen.telegram and configured() and TelegramLink.objects.filter(owner=owner).exists():
        telegram = [turn.pk for turn, _ in turns]
        scheduling.send_telegram(owner.pk, telegram)
    return {"browser": shown, "telegram": len(telegram)}


def telegram_replies_send(
    *, owner_id: int, message_ids: list[int], api: BotApi | None = None
) -> int:
    """Send these replies of the owner's agents to their linked chat, each once, in order;
    how many went. Read again here: a reply whose agent was muted meanwhile, or a chat
    unlinked or Telegram turned off, sends nothing. A chat that blocked the bot, or a message
    Telegram refuses, is logged and left; RetryAfter and network errors are raised for the
    task to retry (the unsent reply's claim released)."""
    if not configured() or not channels_get(owner_id=owner_id).telegram:
        return 0
    link = TelegramLink.objects.filter(owner_id=owner_id, owner__is_active=True).first()
    if link is None:
        return 0
    muted = muted_agent_ids(owner_id=owner_id)
    turns = (
        Message.objects.filter(
            pk__in=message_ids[:100],
            conversation__owner_id=owner_id,
            speaker_kind=Message.SpeakerKind.AGENT,
            kind=Message.Kind.TURN,
        )
        .exclude(speaker_agent_id__in=muted)
        .select_related("speaker_agent", "request__group")
        .order_by("pk")
    )
    sent = 0
    for turn in turns:
        text = reply_text(turn.content)
        group = turn.request.group if turn.request_id else None
        if not text or not _claim("telegram", turn.pk):
            continue
        api = api or BotApi()
        try:
            api.send_message(
                chat_id=link.chat_id,
                text=telegram_text(
                    agent_name=turn.speaker_agent.name,
                    group_name=group.name if group is not None and not group.is_solo else "",
                    text=text,
                ),
            )
        except (RetryAfter, NetworkError):
            _release("telegram", turn.pk)
            raise
        except Forbidden as exc:  # the person blocked the bot: nothing more goes there now
            log.warning("reply %s not sent to Telegram: %s", turn.pk, exc)
            return sent
        except TelegramError as exc:  # this one refused; the next may still go
            log.warning("reply %s not sent to Telegram: %s", turn.pk, exc)
            continue
        sent += 1
    return sent
