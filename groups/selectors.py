"""Reads of groups. Every selector takes the owner and returns only that owner's groups."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Prefetch, QuerySet

from groups.models import Group, Membership

# Larger ids cannot name a row; filtering by them would overflow the database integer.
_MAX_ID = 2**63 - 1


def _with_members(qs: QuerySet[Group]) -> QuerySet[Group]:
    ordered = Membership.objects.select_related("agent").order_by("position", "id")
    return qs.select_related("coordinator").prefetch_related(
        Prefetch("memberships", queryset=ordered, to_attr="ordered_memberships")
    )


def group_list(*, owner: AbstractBaseUser) -> QuerySet[Group]:
    """The owner's roster: neither deleted nor archived."""
    return _with_members(
        Group.objects.filter(owner=owner, deleted_at__isnull=True, archived_at__isnull=True)
    )


def group_get(*, owner: AbstractBaseUser, group_id: int) -> Group | None:
    """One of the owner's groups by id; archived ones still read, deleted ones do not."""
    if not 0 < group_id <= _MAX_ID:
        return None
    return _with_members(
        Group.objects.filter(owner=owner, deleted_at__isnull=True, pk=group_id)
    ).first()
