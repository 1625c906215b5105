"""The queue limits of a group and of its owner: how many messages may wait to be answered,
counted under the owner's quota lock (garden/quotas.py) when a request is added."""

from __future__ import annotations

from django.conf import settings

from garden.errors import QuotaExceeded
from garden.quotas import quota_hold
from groups.models import Group, GroupRequest


def check_queue_room(*, group: Group) -> None:
    """Hold the group's and its owner's queues to their limits, counting the request just
    added (429 QUEUE_FULL, the limit in the message). The owner's limit counts every
    unanswered request, running ones too, so an owner cannot have more groups working at once
    than GARDEN_MAX_QUEUED_PER_OWNER. Caller holds FOR UPDATE on the group row and has written
    the new request; this takes the owner's quota lock, last."""
    queued = GroupRequest.objects.filter(state=GroupRequest.State.QUEUED)
    unanswered = GroupRequest.objects.filter(
        state__in=[GroupRequest.State.QUEUED, *GroupRequest.ACTIVE_STATES]
    )
    per_group = settings.GARDEN_MAX_QUEUED_PER_GROUP
    quota_hold(
        owner_id=group.owner_id,
        count=queued.filter(group=group).count,
        limit=per_group,
        refusal=lambda: QuotaExceeded(
            "QUEUE_FULL",
            f"{'This agent' if group.is_solo else 'This group'} already has {per_group} "
            "messages waiting, the "
            "limit on this site; wait for them to be answered (or Stop) before sending "
            "more.",
            field="text",
            status=429,
        ),
    )
    per_owner = settings.GARDEN_MAX_QUEUED_PER_OWNER
    quota_hold(
        owner_id=group.owner_id,
        count=unanswered.filter(group__owner_id=group.owner_id).count,
        limit=per_owner,
        refusal=lambda: QuotaExceeded(
            "QUEUE_FULL",
            f"You already have {per_owner} messages waiting across your "
            "groups and agents (being answered or queued), the limit on this site; wait for them "
            "to be answered before sending more.",
            field="text",
            status=429,
        ),
    )
