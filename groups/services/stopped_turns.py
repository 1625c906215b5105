"""What Stop keeps of a reply it cuts short: the text the room was shown while the model wrote
it, stored as the speaker's turn and marked stopped (``Message.stopped_at``), its call counted as
the call it was; and the word that tells the step still streaming to stop.

A step's draft keeps what it has pushed under the request and fence in the cache (the process's
shared Redis, or the embedded default's one process); Stop reads it before its transaction and
writes the turn in it, under the request's row lock, only while the call's reservation is still
open, which the step's own record would have closed. So a reply is stored once: whole by its
step, or as far as it was shown by Stop."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from garden import events
from garden.models import Agent, Message
from garden.services.conversations import message_append, text_block
from groups.models import CallReservation, GroupRequest

log = logging.getLogger(__name__)


def _draft_key(request_id: int, fence: int) -> str:
    return f"garden:draft:{request_id}:{fence}"


def _stop_key(request_id: int) -> str:
    return f"garden:stopped:{request_id}"


def _kept_seconds() -> float:
    # As long as a call may stream, and then some: a draft outlives no call it belongs to.
    return settings.GARDEN_MODEL_CALL_TIMEOUT + 60


def draft_keep(*, request_id: int, fence: int, agent_id: int, text: str) -> None:
    """Keep what the step at ``fence`` has shown of ``agent_id``'s reply so far. Best effort:
    a cache that does not answer costs the kept draft, never the step."""
    try:
        cache.set(_draft_key(request_id, fence), {"agent": agent_id, "text": text}, _kept_seconds())
    except Exception:
        log.warning("draft of request %s not kept", request_id, exc_info=True)


def drafts_kept(requests: list[tuple[int, int]]) -> dict[int, dict[str, Any]]:
    """The drafts kept for ``(request id, fence)`` pairs, by request id (read before any
    transaction opens: the cache is network I/O on the services layout)."""
    if not requests:
        return {}
    keys = {_draft_key(pk, fence): (pk, fence) for pk, fence in requests}
    try:
        found = cache.get_many(list(keys))
    except Exception:
        log.warning("drafts of requests %s not read", [pk for pk, _ in requests], exc_info=True)
        return {}
    return {keys[key][0]: {**draft, "fence": keys[key][1]} for key, draft in found.items()}


def stopped_turn_record(*, request: GroupRequest, draft: dict[str, Any] | None) -> Message | None:
    """Store ``draft`` (from ``drafts_kept``) as its speaker's turn, marked stopped, and count
    its call as consumed (reason "stopped"); None, writing nothing, when there is none to keep
    or the step already recorded its reply (its reservation is closed) or moved on.

    Caller holds FOR UPDATE on the group row and then ``request``'s, in the transaction that
    stops it, before the request is finished (so the turn comes before the stop's notice)."""
    if not draft or not draft.get("text") or draft["fence"] != request.fence:
        return None
    now = timezone.now()
    consumed = CallReservation.objects.filter(
        request_id=request.pk,
        fence=request.fence,
        agent_id=draft["agent"],
        status=CallReservation.Status.RESERVED,
    ).update(status=CallReservation.Status.CONSUMED, reason="stopped", finished_at=now)
    if not consumed:
        return None
    speaker = Agent.objects.get(pk=draft["agent"])
    return message_append(
        conversation_id=request.conversation_id,
        speaker_kind=Message.SpeakerKind.AGENT,
        speaker_agent=speaker,
        content=[text_block(draft["text"][: settings.GARDEN_TURN_MAX_CHARS])],
        request_id=request.pk,
        step=request.fence,
        stopped_at=now,
        channel=events.group_channel(request.group_id),
    )


def stop_announce(request_id: int) -> None:
    """Tell a step still streaming ``request_id``'s reply that it was stopped (called after the
    stop commits). Best effort: a step that does not hear it streams on, and its record finds
    the fence moved, so nothing of it is written."""
    try:
        cache.set(_stop_key(request_id), 1, _kept_seconds())
    except Exception:
        log.warning("stop of request %s not announced", request_id, exc_info=True)


def is_stopped(request_id: int) -> bool:
    try:
        return bool(cache.get(_stop_key(request_id)))
    except Exception:
        return False
