"""Workspaces: who shares what. Every person has a personal workspace (made with them, holding
what is theirs alone); a team workspace has several people, each with a role."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

WORKSPACE_NAME_MAX_CHARS = 100


class Workspace(models.Model):
    """A person's own (``personal``, exactly one per person, ``personal_for`` them) or a team's."""

    class Kind(models.TextChoices):
        PERSONAL = "personal", "Personal"
        TEAM = "team", "Team"

    name = models.CharField(max_length=WORKSPACE_NAME_MAX_CHARS)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.TEAM)
    personal_for = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="personal_workspace",
        help_text="The person whose own workspace this is; empty for a team's.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(kind="personal") & Q(personal_for__isnull=False))
                | (Q(kind="team") & Q(personal_for__isnull=True)),
                name="workspace_personal_has_its_person",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class WorkspaceMember(models.Model):
    """One person in one workspace, with a role: ``admin`` (people, accounts and keys,
    budgets, and everything a member may), ``member`` (rooms, agents, groups), ``viewer``
    (reads only). ``approver`` lets a member or viewer decide approvals; an admin always may."""

    class Role(models.TextChoices):
        ADMIN = "admin", "Admin"
        MEMBER = "member", "Member"
        VIEWER = "viewer", "Viewer"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="members")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workspace_memberships"
    )
    role = models.CharField(
        max_length=10, choices=Role.choices, default=Role.MEMBER, db_default=Role.MEMBER
    )
    approver = models.BooleanField(
        default=False,
        db_default=False,
        help_text="May decide approvals in this workspace (an admin always may).",
    )
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "user"], name="one_membership_per_person"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} ({self.role})"


class WorkspaceInvitation(models.Model):
    """An admin's invitation into a team workspace, for one email address (someone who may
    not have an account yet) or one username. Its link carries a secret of which only the
    SHA-256 is kept; it works once, until ``expires_at``, unless revoked."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(blank=True)
    username = models.CharField(max_length=150, blank=True)
    role = models.CharField(
        max_length=10, choices=WorkspaceMember.Role.choices, default=WorkspaceMember.Role.MEMBER
    )
    approver = models.BooleanField(default=False)
    secret_hash = models.CharField(max_length=64, unique=True, editable=False)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(email="") & ~Q(username="")) | (~Q(email="") & Q(username="")),
                name="invitation_names_one_person",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.email or self.username} to {self.workspace}"
