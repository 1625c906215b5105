"""Reads the dashboard's pages need beyond the garden and groups selectors; all owner-scoped."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from garden.models import Agent, Artifact
from groups.models import Group
from groups.rules import MAKER, MIN_RUNNABLE_MEMBERS

CANVAS_LIMIT = 50


def teammates(agents: Iterable[Agent]) -> list[Agent]:
    """The agents that count towards a group: able to run, and not Agent Father."""
    return [a for a in agents if a.builtin != MAKER and a.can_run]


def can_make_group(agents: Iterable[Agent]) -> bool:
    return len(teammates(agents)) >= MIN_RUNNABLE_MEMBERS


def group_candidates(agents: Iterable[Agent]) -> list[Agent]:
    """Who the creation sheet and the Members editor offer: every agent but the maker."""
    return [a for a in agents if a.builtin != MAKER]


def group_artifacts(*, owner: AbstractBaseUser, group: Group) -> QuerySet[Artifact]:
    """What the group made, newest first: artifacts of the group's conversations."""
    return (
        Artifact.objects.filter(owner=owner, conversation__group=group)
        .select_related("agent")
        .order_by("-id")[:CANVAS_LIMIT]
    )


def agent_groups(*, owner: AbstractBaseUser, agent: Agent) -> QuerySet[Group]:
    return Group.objects.filter(
        owner=owner, deleted_at__isnull=True, memberships__agent=agent
    ).order_by("name", "id")
