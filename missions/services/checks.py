"""The checks of a mission write: its target, its origin conversation, the owner's mission
quota. Each raises a ServiceError on the field it concerns and writes nothing."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from garden.errors import MAX_ID, QuotaExceeded, ServiceError
from garden.models import Agent, Conversation
from garden.quotas import quota_hold
from groups.models import Group
from missions.models import Mission


def check_target(*, owner: AbstractBaseUser, target_type: str, target_id: int) -> Agent | Group:
    """The owner's agent or group a mission may target: not another owner's, not removed,
    deleted or archived. Raises ServiceError on field ``target_id``."""
    if target_type not in Mission.TargetType.values:
        raise ServiceError(
            "invalid_choice",
            f"target_type must be one of {', '.join(Mission.TargetType.values)}.",
            field="target_type",
        )
    if not 0 < target_id <= MAX_ID:
        raise ServiceError("TARGET_NOT_FOUND", f"No such {target_type}.", field="target_id")
    if target_type == Mission.TargetType.AGENT:
        agent = Agent.objects.filter(owner=owner, pk=target_id).first()
        if agent is None:
            raise ServiceError("TARGET_NOT_FOUND", "No such agent.", field="target_id")
        if agent.removed_at is not None:
            raise ServiceError("TARGET_REMOVED", "This agent was removed.", field="target_id")
        return agent
    group = Group.objects.filter(
        owner=owner, pk=target_id, kind=Group.Kind.TEAM, deleted_at__isnull=True
    ).first()
    if group is None:
        raise ServiceError("TARGET_NOT_FOUND", "No such group.", field="target_id")
    if group.archived_at is not None:
        raise ServiceError("TARGET_ARCHIVED", "This group is archived.", field="target_id")
    return group


def check_origin(*, owner: AbstractBaseUser, conversation_id: int) -> Conversation:
    """An open conversation of the owner's (1:1 or a group's) where the mission was asked for."""
    conversation = (
        Conversation.objects.filter(owner=owner, pk=conversation_id)
        .exclude(group__deleted_at__isnull=False)
        .first()
        if 0 < conversation_id <= MAX_ID
        else None
    )
    if conversation is None:
        raise ServiceError("ORIGIN_NOT_FOUND", "No such conversation.", field="origin_conversation")
    if conversation.status != Conversation.Status.OPEN:
        raise ServiceError(
            "ORIGIN_CLOSED", "This conversation is closed.", field="origin_conversation"
        )
    return conversation


def check_mission_quota(*, owner: AbstractBaseUser) -> None:
    """After the new mission is written: refuse it past the owner's limit (takes the owner's
    quota lock, last)."""
    limit = settings.GARDEN_MAX_MISSIONS_PER_OWNER
    quota_hold(
        owner_id=owner.pk,
        limit=limit,
        count=Mission.objects.filter(owner=owner).count,
        refusal=lambda: QuotaExceeded(
            "MISSION_LIMIT",
            f"You have {limit} missions, the limit on this site; delete one to make another.",
        ),
    )
