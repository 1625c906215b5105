"""Signals the group loop sends; receivers are thin and call services."""

from collections.abc import Iterable

from django.db import transaction
from django.dispatch import Signal

from groups.models import Approval

# Sent after commit when a request reaches completed, stopped or failed.
# kwargs: request_id (int), state (str), outcome_code (str)
request_finished = Signal()

# Sent after commit when approvals were created or changed: decided on any surface, rejected
# by Stop, a clear or a finished request, or run (their result recorded). Surfaces that show
# an approval outside the room (Telegram) listen and bring their copy up to date.
# kwargs: approval_ids (list[int])
approvals_changed = Signal()


def approvals_changed_on_commit(approval_ids: Iterable[int]) -> None:
    """Send ``approvals_changed`` once this transaction commits (at once outside one). A
    receiver's failure is logged by the signal and never fails the change it reports."""
    ids = sorted(set(approval_ids))
    if ids:
        transaction.on_commit(
            lambda: approvals_changed.send_robust(sender=Approval, approval_ids=ids), robust=True
        )
