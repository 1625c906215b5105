"""A failed model call: counted as the seed says (a confirmed rejection gives the call back,
anything ambiguous keeps it), then retried within the ceiling or ended honestly in the room."""

from __future__ import annotations

import time

from django.conf import settings

from garden.models import Agent
from garden.providers import MalformedReply, ProviderConfigError, ProviderError, ReplyTooLarge
from groups import budget, scheduling
from groups.domain.outcomes import StepOutcome
from groups.domain.routing import Contribution
from groups.loop.asks import skip_member
from groups.loop.fencing import StepWriter, fenced
from groups.loop.room import Room
from groups.models import CallReservation, GroupRequest


def end_without_summary(w: StepWriter, why: str) -> None:
    """End the request without its summary, saying why; the contributions stand."""
    w.finish(
        state=GroupRequest.State.FAILED,
        outcome_code="SYNTHESIS_FAILED",
        outcome=f"The summary did not come: {why}.",
        notice=f"The summary did not come ({why}). The contributions above stand under their speakers.",
    )


def after_failure(
    room: Room,
    speaker: Agent,
    purpose: str,
    reservation: CallReservation,
    exc: ProviderError,
    *,
    attempt: int,
    first_at: float,
) -> StepOutcome:
    """Count the failed call as the seed says, then retry within the ceiling or end honestly.

    A confirmed rejection (or a configuration error: nothing was sent) gives the call back;
    anything ambiguous keeps it (``budget.settle_failed_call``). A retry always reserves again.
    """
    budget.settle_failed_call(reservation=reservation, failure=exc)
    # Asking again would get the same answer: a configuration nothing was sent with, or a
    # server that answered with what cannot be read or with more than the call allows.
    retryable = not isinstance(exc, (ProviderConfigError, MalformedReply, ReplyTooLarge))
    wait = min(getattr(exc, "retry_after", None) or 0.5 * 2 ** (attempt - 1), 30.0)
    within = (
        attempt < settings.GARDEN_PROVIDER_RETRY_ATTEMPTS
        and time.time() + wait - first_at < settings.GARDEN_PROVIDER_RETRY_SECONDS
    )
    if retryable and within:
        with fenced(room):
            # The retry claims this step's fence again; nothing else is written (the fence
            # check alone: a stale step sends no retry).
            scheduling.enqueue_step_on_commit(
                room.request.pk,
                room.fence,
                group_id=room.group.pk,
                attempt=attempt + 1,
                first_at=first_at,
                countdown=wait,
            )
        return StepOutcome.RETRY
    if purpose == CallReservation.Purpose.SYNTHESIS:
        with fenced(room) as w:
            end_without_summary(w, exc.code)
        return StepOutcome.SYNTHESIS_FAILED
    queue = [Contribution.from_json(c) for c in room.request.queue]
    if queue and queue[0].agent == speaker.pk:
        return skip_member(room, queue, _what_failed(exc, "its"))
    what = _what_failed(exc, f"@{speaker.handle}'s")
    with fenced(room) as w:
        w.finish(
            state=GroupRequest.State.FAILED,
            outcome_code=exc.code,
            outcome=f"{what}.",
            notice=f"{what}; the request ended.",
        )
    return StepOutcome.FAILED


def _what_failed(exc: ProviderError, whose: str) -> str:
    """How a failed call is told in the room: what happened, in the words an account's Test
    uses, and its code."""
    return f"{whose} model call failed ({exc.code}: {exc.words.rstrip('.')})"
