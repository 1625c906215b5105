"""How a step claims its fence and reads its room (``groups.statements.claim_fence``: one
statement on PostgreSQL, its ORM reference elsewhere), and the continuation re-sent for a
delivery that finds the last step completed and nothing claimed after it."""

from __future__ import annotations

from garden import telemetry
from groups import lock_order, scheduling
from groups.loop.room import Room, load_room
from groups.models import GroupRequest
from groups.statements import Claim


@telemetry.traced("garden.claim")
def claim_room(request_id: int, fence: int, group_id: int) -> Room | None:
    """Claim the step's fence and read its room; None for a stale or duplicate delivery.

    On PostgreSQL the claim returns the request and group rows, the roster's stamp and the
    thread's last seq in the same statement; elsewhere its ORM reference reads them back.
    """
    claimed = claim(request_id, fence, group_id)
    if claimed is None:
        return None
    return claimed_room(claimed)


def claimed_room(claimed: Claim) -> Room:
    """The room of the step that made ``claimed`` — by its claim, or by the write of the step
    before it, which claimed it too (``groups.statements.record_step``)."""
    request = claimed.request
    room = load_room(
        request.pk,
        request.fence,
        request=request,
        group=claimed.group,
        roster_stamp=claimed.roster_stamp,
    )
    room.thread_last_seq = claimed.thread_last_seq
    room.reserved_ahead = claimed.reservation
    return room


def claim(request_id: int, fence: int, group_id: int) -> Claim | None:
    """Take the next fence for this step (``groups.statements.claim_fence``), or None for a
    stale or duplicate delivery.

    A fence claimed by a step that never completed (its worker died; we hold the lock, so
    it is not running) is claimed again one higher, which also shuts out that step if it
    ever wakes, and that step's reservations are settled in the same write. A delivery that
    finds the last step completed with nothing claimed after it re-enqueues the continuation,
    in case a crash lost it between commit and enqueue.
    """
    claimed = lock_order.claim_fence(request_id=request_id, fence=fence, group_id=group_id)
    if claimed is None:
        continue_if_lost(request_id, fence, group_id)
        return None
    return claimed


def continue_if_lost(request_id: int, fence: int, group_id: int) -> None:
    """A delivery that claimed nothing but finds the last step completed with nothing
    claimed after it re-enqueues the continuation (a crash may have lost it)."""
    row = (
        GroupRequest.objects.filter(
            pk=request_id, group_id=group_id, state__in=GroupRequest.STEPPABLE_STATES
        )
        .values("fence", "completed_fence")
        .first()
    )
    if row and row["fence"] == row["completed_fence"] == fence + 1:
        scheduling.enqueue_step(request_id, fence + 1, group_id=group_id)
