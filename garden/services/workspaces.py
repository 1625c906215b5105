"""Workspaces and the people in them: a person's own workspace, team workspaces, who is in one
with which role, and the invitations that bring people in. Every change is a named refusal or
done whole."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from garden.errors import QuotaExceeded, ServiceError, not_found
from garden.models import Workspace, WorkspaceInvitation, WorkspaceMember
from garden.models.workspaces import WORKSPACE_NAME_MAX_CHARS
from garden.quotas import quota_hold
from garden.services.tokens import token_hash

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


# Invitations. The link's secret is 256 random bits; only its SHA-256 is kept, so a leaked
# database cannot be turned into working links and a guessed one names nothing.
INVITATION_PREFIX = "gdi_"


@dataclass(frozen=True)
class MadeInvitation:
    invitation: WorkspaceInvitation
    secret: str  # shown to the admin who made it, once, as the link


@transaction.atomic
def invitation_create(
    *,
    workspace: Workspace,
    by: AbstractBaseUser,
    email: str = "",
    username: str = "",
    role: str = Role.MEMBER,
    approver: bool = False,
    expires_in_days: int | None = None,
) -> MadeInvitation:
    """Invite one person, by email address or by username, into a team workspace."""
    _team(workspace)
    _check_role(role)
    email, username = (email or "").strip().lower(), (username or "").strip()
    if bool(email) == bool(username):
        raise ServiceError(
            "INVITATION_NAMES_ONE",
            "Invite one person: by email address or by username, not both.",
            field="email",
        )
    days = expires_in_days or settings.GARDEN_INVITATION_DAYS
    if not 1 <= days <= settings.GARDEN_INVITATION_MAX_DAYS:
        raise ServiceError(
            "INVITATION_DAYS",
            f"An invitation lasts 1 to {settings.GARDEN_INVITATION_MAX_DAYS} days.",
            field="expires_in_days",
        )
    Workspace.objects.select_for_update().filter(pk=workspace.pk).first()
    limit = settings.GARDEN_MAX_OPEN_INVITATIONS_PER_WORKSPACE
    if invitations_open(workspace=workspace).count() >= limit:
        raise QuotaExceeded(
            "INVITATION_LIMIT",
            f"This workspace has {limit} open invitations, the limit on this site; revoke one "
            "or wait for them to be used or to expire.",
        )
    secret = INVITATION_PREFIX + secrets.token_urlsafe(32)
    invitation = WorkspaceInvitation.objects.create(
        workspace=workspace,
        email=email,
        username=username,
        role=role,
        approver=approver,
        secret_hash=token_hash(secret),
        invited_by=by,
        expires_at=timezone.now() + timedelta(days=days),
    )
    return MadeInvitation(invitation=invitation, secret=secret)


def invitations_open(*, workspace: Workspace):
    return WorkspaceInvitation.objects.filter(
        workspace=workspace,
        used_at__isnull=True,
        revoked_at__isnull=True,
        expires_at__gt=timezone.now(),
    )


def invitation_revoke(*, invitation: WorkspaceInvitation) -> None:
    WorkspaceInvitation.objects.filter(
        pk=invitation.pk, used_at__isnull=True, revoked_at__isnull=True
    ).update(revoked_at=timezone.now())


def _usable_locked(secret: str) -> WorkspaceInvitation:
    """The invitation the secret opens, locked for this transaction, or its refusal by name."""
    invitation = (
        WorkspaceInvitation.objects.select_for_update()
        .select_related("workspace")
        .filter(secret_hash=token_hash(secret or ""))
        .first()
    )
    if invitation is None:
        raise ServiceError(
            "INVITATION_INVALID",
            "This invitation link is not one this site made: ask for a new one.",
            status=404,
        )
    if invitation.used_at is not None:
        raise ServiceError(
            "INVITATION_USED", "This invitation has been used: ask for a new one.", status=409
        )
    if invitation.revoked_at is not None:
        raise ServiceError(
            "INVITATION_REVOKED", "This invitation was withdrawn: ask for a new one.", status=410
        )
    if invitation.expires_at <= timezone.now():
        raise ServiceError(
            "INVITATION_EXPIRED", "This invitation has expired: ask for a new one.", status=410
        )
    return invitation


def invitation_peek(*, secret: str) -> WorkspaceInvitation:
    """The invitation the secret opens, if it still may be used (for the page that shows it)."""
    with transaction.atomic():
        return _usable_locked(secret)


def _take(invitation: WorkspaceInvitation, user: AbstractBaseUser) -> WorkspaceMember:
    membership = workspace_member_add(
        workspace=invitation.workspace,
        user=user,
        role=invitation.role,
        approver=invitation.approver,
        by=invitation.invited_by,
    )
    invitation.used_at = timezone.now()
    invitation.used_by = user
    invitation.save(update_fields=["used_at", "used_by"])
    return membership


@transaction.atomic
def invitation_accept(*, secret: str, user: AbstractBaseUser) -> WorkspaceMember:
    """A signed-in person takes up an invitation meant for them: once, before it expires."""
    invitation = _usable_locked(secret)
    mine = (
        invitation.username == user.get_username()
        if invitation.username
        else invitation.email == (getattr(user, "email", "") or "").strip().lower()
    )
    if not mine:
        raise ServiceError(
            "INVITATION_NOT_YOURS",
            "This invitation is for someone else: sign in as the person it names.",
            status=403,
        )
    return _take(invitation, user)


@transaction.atomic
def invitation_sign_up(*, secret: str, username: str, password: str) -> WorkspaceMember:
    """A new person, invited by email address, makes their account and joins in one step;
    the site's password rules apply."""
    invitation = _usable_locked(secret)
    if not invitation.email:
        raise ServiceError(
            "INVITATION_NEEDS_SIGN_IN",
            "This invitation names an account: sign in as it to join.",
            status=403,
        )
    User = get_user_model()
    username = (username or "").strip()
    try:
        User.username_validator(username)
    except ValidationError as exc:
        raise ServiceError("USERNAME_INVALID", " ".join(exc.messages), field="username") from exc
    if not username or len(username) > 150:
        raise ServiceError("USERNAME_INVALID", "Choose a username.", field="username")
    if User.objects.filter(username__iexact=username).exists():
        raise ServiceError("USERNAME_TAKEN", "That username is taken.", field="username")
    user = User(username=username, email=invitation.email)
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise ServiceError("PASSWORD_WEAK", " ".join(exc.messages), field="password") from exc
    user.set_password(password)
    user.save()
    return _take(invitation, user)
