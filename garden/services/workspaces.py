"""Workspaces and the people in them: a person's own workspace, team workspaces, and who is
in one with which role. Every change is a named refusal or done whole."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from garden.errors import QuotaExceeded, ServiceError, not_found
from garden.models import Workspace, WorkspaceMember
from garden.models.workspaces import WORKSPACE_NAME_MAX_CHARS
from garden.quotas import quota_hold

Role = WorkspaceMember.Role


def personal_workspace_name(user: AbstractBaseUser) -> str:
    return f"{user.get_username()}'s workspace"[:WORKSPACE_NAME_MAX_CHARS]


def workspace_personal_ensure(*, user: AbstractBaseUser) -> Workspace:
    """The person's own workspace, made with them as its admin if it is not there yet; two
    callers at once make one."""
    found = Workspace.objects.filter(personal_for=user).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            workspace = Workspace.objects.create(
                name=personal_workspace_name(user), kind=Workspace.Kind.PERSONAL, personal_for=user
            )
            WorkspaceMember.objects.create(workspace=workspace, user=user, role=Role.ADMIN)
    except IntegrityError:
        return Workspace.objects.get(personal_for=user)
    return workspace


def _name(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise ServiceError("WORKSPACE_NAME", "Give the workspace a name.", field="name")
    if len(name) > WORKSPACE_NAME_MAX_CHARS:
        raise ServiceError(
            "WORKSPACE_NAME",
            f"A workspace's name is at most {WORKSPACE_NAME_MAX_CHARS} characters.",
            field="name",
        )
    return name


@transaction.atomic
def workspace_create(*, name: str, by: AbstractBaseUser) -> Workspace:
    """A team workspace, with the person who made it as its first admin."""
    workspace = Workspace.objects.create(name=_name(name), kind=Workspace.Kind.TEAM)
    WorkspaceMember.objects.create(workspace=workspace, user=by, role=Role.ADMIN, added_by=by)
    limit = settings.GARDEN_MAX_TEAM_WORKSPACES_PER_PERSON
    quota_hold(
        owner_id=by.pk,
        limit=limit,
        count=WorkspaceMember.objects.filter(user=by, workspace__kind=Workspace.Kind.TEAM).count,
        refusal=lambda: QuotaExceeded(
            "WORKSPACE_LIMIT",
            f"You are in {limit} team workspaces, the limit on this site; leave one to make "
            "another.",
        ),
    )
    return workspace


def _team(workspace: Workspace) -> None:
    if workspace.kind == Workspace.Kind.PERSONAL:
        raise ServiceError(
            "WORKSPACE_PERSONAL",
            "A personal workspace is its person's alone: make a team workspace to share.",
        )


def _check_role(role: str) -> str:
    if role not in Role.values:
        raise ServiceError(
            "WORKSPACE_ROLE",
            f"A role is one of {', '.join(Role.values)}.",
            field="role",
        )
    return role


@transaction.atomic
def workspace_member_add(
    *,
    workspace: Workspace,
    user: AbstractBaseUser,
    role: str = Role.MEMBER,
    approver: bool = False,
    by: AbstractBaseUser | None = None,
) -> WorkspaceMember:
    """Put a person in a team workspace; they may be in it once."""
    _team(workspace)
    _check_role(role)
    Workspace.objects.select_for_update().filter(pk=workspace.pk).first()
    if WorkspaceMember.objects.filter(workspace=workspace, user=user).exists():
        raise ServiceError(
            "WORKSPACE_MEMBER_EXISTS",
            f"{user.get_username()} is already in this workspace.",
            status=409,
        )
    limit = settings.GARDEN_MAX_PEOPLE_PER_WORKSPACE
    if WorkspaceMember.objects.filter(workspace=workspace).count() >= limit:
        raise QuotaExceeded(
            "WORKSPACE_FULL", f"This workspace has {limit} people, the limit on this site."
        )
    return WorkspaceMember.objects.create(
        workspace=workspace, user=user, role=role, approver=approver, added_by=by
    )


def _membership_locked(workspace: Workspace, user: AbstractBaseUser) -> WorkspaceMember:
    # The workspace's admins are counted under the workspace's row lock, so two changes at
    # once cannot together leave it without one.
    Workspace.objects.select_for_update().filter(pk=workspace.pk).first()
    membership = WorkspaceMember.objects.filter(workspace=workspace, user=user).first()
    if membership is None:
        raise not_found("member of this workspace")
    return membership


def _keep_an_admin(membership: WorkspaceMember) -> None:
    if membership.role != Role.ADMIN:
        return
    others = (
        WorkspaceMember.objects.filter(workspace_id=membership.workspace_id, role=Role.ADMIN)
        .exclude(pk=membership.pk)
        .exists()
    )
    if not others:
        raise ServiceError(
            "WORKSPACE_LAST_ADMIN",
            "A workspace keeps at least one admin: make another person admin first.",
            status=409,
        )


@transaction.atomic
def workspace_member_change(
    *,
    workspace: Workspace,
    user: AbstractBaseUser,
    role: str | None = None,
    approver: bool | None = None,
) -> WorkspaceMember:
    """Change a person's role or approver right in a team workspace."""
    _team(workspace)
    membership = _membership_locked(workspace, user)
    if role is not None:
        _check_role(role)
        if role != Role.ADMIN:
            _keep_an_admin(membership)
        membership.role = role
    if approver is not None:
        membership.approver = approver
    membership.save(update_fields=["role", "approver"])
    return membership


@transaction.atomic
def workspace_member_remove(*, workspace: Workspace, user: AbstractBaseUser) -> None:
    """Take a person out of a team workspace (the last admin stays)."""
    _team(workspace)
    membership = _membership_locked(workspace, user)
    _keep_an_admin(membership)
    membership.delete()
