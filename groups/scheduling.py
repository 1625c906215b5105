"""The group loop's task names and its sends of them, through ``garden.scheduling``: by name,
after commit, and — inside a step — only once the group's lock is released. Services and the
step enqueue through here; ``groups.tasks`` defines the tasks under the same names, so nothing
below the tasks imports them."""

from __future__ import annotations

from typing import Any, NamedTuple

from garden.scheduling import continue_after_commit, send, send_after_commit, send_on_commit
from groups.statements import Claim

ADVANCE_REQUEST = "groups.advance_request"
START_NEXT_REQUEST = "groups.start_next_request"
AFTER_REQUEST = "groups.after_request"
EXECUTE_APPROVAL = "groups.execute_approval"
SWEEP_REQUESTS = "groups.sweep_requests"
PURGE_DELETED_GROUPS = "groups.purge_deleted_groups"
DELIVER_WEBHOOK = "groups.deliver_webhook"
SWEEP_WEBHOOKS = "groups.sweep_webhooks"
PURGE_WEBHOOKS = "groups.purge_webhooks"
# The name 1:1 replies were sent under before they ran on the group loop: a message still on
# the broker from then is answered as a request (groups.tasks.legacy_chat_reply).
LEGACY_CHAT_REPLY = "garden.chat_reply"


def enqueue_step(
    request_id: int,
    fence: int,
    *,
    group_id: int | None = None,
    attempt: int = 1,
    first_at: float | None = None,
    countdown: float | None = None,
    waits: int = 0,
    tools: bool = False,
) -> None:
    """Send one step of ``request_id`` expected at ``fence`` now (no transaction to wait for).

    ``waits`` counts the times it found no free slot of its owner (its next pause grows with
    it); ``tools`` continues the step that claimed ``fence`` by running its reply's tools."""
    kwargs: dict[str, Any] = {
        "request_id": request_id,
        "fence": fence,
        "attempt": attempt,
        "first_at": first_at,
    }
    if group_id is not None:
        kwargs["group_id"] = group_id
    if waits:
        kwargs["waits"] = waits
    if tools:
        kwargs["tools"] = True
    send(ADVANCE_REQUEST, countdown=countdown, **kwargs)


def enqueue_step_on_commit(request_id: int, fence: int, **kwargs: Any) -> None:
    """``enqueue_step`` once the transaction commits (and a step's lock is released)."""
    send_after_commit(lambda: enqueue_step(request_id, fence, **kwargs))


def next_step_on_commit(
    request_id: int, fence: int, *, group_id: int, claim: Claim | None = None
) -> None:
    """The next step of ``request_id`` at ``fence``, once the transaction commits: the step's
    continuation (``NextStep``), which the delivery holding the group's lock may run itself
    (groups/loop/step.py), else sent when the step ends. ``claim``: the step's write claimed
    the next fence already; sent, the step at ``fence`` takes the claim over as a lost one's."""
    continue_after_commit(
        NextStep(request_id, fence, group_id, claim),
        lambda: enqueue_step(request_id, fence, group_id=group_id),
    )


class NextStep(NamedTuple):
    """What a step's continuation carries on: the request, at the fence its last step
    completed, and the next fence's claim when that step's write made it."""

    request_id: int
    fence: int
    group_id: int
    claim: Claim | None = None


def start_next_on_commit(group_id: int) -> None:
    """Start the group's next queued request once this transaction commits."""
    send_on_commit(START_NEXT_REQUEST, group_id=group_id)


def after_request_on_commit(request_id: int) -> None:
    """After a completed request commits: roll the thread over if full, then start the next."""
    send_on_commit(AFTER_REQUEST, request_id=request_id)


def execute_approval_on_commit(approval_id: int) -> None:
    """Run an approved action once the decision commits."""
    send_on_commit(EXECUTE_APPROVAL, approval_id=approval_id)


def purge_deleted_groups_soon(owner_id: int) -> None:
    """Ask a worker to remove the owner's groups whose minute to undo has passed."""
    send(PURGE_DELETED_GROUPS, owner_id=owner_id)


def deliver_webhooks_on_commit(delivery_ids: list[int]) -> None:
    """Send each webhook delivery's first try once the transaction commits."""
    ids = list(delivery_ids)

    def deliver() -> None:
        for delivery_id in ids:
            send(DELIVER_WEBHOOK, delivery_id=delivery_id)

    if ids:
        send_after_commit(deliver)


def deliver_webhook_later_on_commit(delivery_id: int, *, countdown: float) -> None:
    """Send a webhook delivery's next try ``countdown`` seconds after the transaction that
    recorded its last one commits."""
    send_on_commit(DELIVER_WEBHOOK, countdown=countdown, delivery_id=delivery_id)
