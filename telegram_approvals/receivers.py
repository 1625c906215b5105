"""Signal receivers: a change to approvals (created, decided anywhere, rejected by Stop or a
clear, run) brings their Telegram messages up to date, in a worker."""

from __future__ import annotations

from django.db.models import Q
from django.dispatch import receiver

from groups.models import Approval
from groups.signals import approvals_changed
from telegram_approvals import scheduling
from telegram_approvals.bot import configured


@receiver(approvals_changed, dispatch_uid="telegram_approvals_changed")
def _approvals_changed(sender, approval_ids, **kwargs) -> None:
    if not configured():
        return
    # Only approvals with a Telegram side: their owner linked a chat, or a message was sent.
    ids = Approval.objects.filter(
        Q(owner__telegram_link__isnull=False) | Q(telegram_message__isnull=False),
        pk__in=approval_ids,
    ).values_list("pk", flat=True)
    scheduling.sync_approvals(list(ids))
