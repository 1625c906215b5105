"""Reads. Every selector that takes a user returns only that user's rows (or, for workspaces,
the ones they are in)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, JSONField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils.functional import SimpleLazyObject

from garden import credentials
from garden.models import (
    Agent,
    Conversation,
    McpServer,
    Message,
    ModelAccount,
    Workspace,
    WorkspaceMember,
)
from garden.providers.types import AccountConfig, CredentialError


def agent_list(*, owner: AbstractBaseUser, include_removed: bool = False) -> QuerySet[Agent]:
    qs = Agent.objects.filter(owner=owner).select_related("model_account")
    return qs if include_removed else qs.filter(removed_at__isnull=True)


def model_account_list(*, owner: AbstractBaseUser) -> QuerySet[ModelAccount]:
    return ModelAccount.objects.filter(owner=owner)


def conversation_list(*, owner: AbstractBaseUser) -> QuerySet[Conversation]:
    return Conversation.objects.filter(owner=owner, agent__isnull=False).select_related("agent")


def conversation_get(*, owner: AbstractBaseUser, conversation_id: int) -> Conversation | None:
    return conversation_list(owner=owner).filter(pk=conversation_id).first()


def conversation_summaries(
    *, owner: AbstractBaseUser, agent_id: int | None = None
) -> QuerySet[Conversation]:
    """The person's 1:1 conversations (with ``agent_id`` alone when given), the one spoken in
    last first: each with ``last_activity_at`` (its last turn's time, or its creation's) and
    ``first_content`` (its first turn's blocks, for its first words when it has no title)."""
    turns = Message.objects.filter(conversation=OuterRef("pk"))
    # The last turn is found by the thread's own counter: one row of the (thread, seq) index.
    last = turns.filter(seq=OuterRef("last_seq")).values("created_at")[:1]
    first = turns.filter(kind=Message.Kind.TURN).order_by("seq").values("content")[:1]
    found = conversation_list(owner=owner)
    if agent_id is not None:
        found = found.filter(agent_id=agent_id)
    return found.annotate(
        last_activity_at=Coalesce(Subquery(last), "created_at"),
        first_content=Subquery(first, output_field=JSONField()),
    ).order_by("-last_activity_at", "-id")


def message_list(
    *, conversation_id: int, after_seq: int = 0, limit: int = 200
) -> QuerySet[Message]:
    return (
        Message.objects.filter(conversation_id=conversation_id, seq__gt=after_seq)
        .select_related("speaker_agent", "author")
        .order_by("seq")[:limit]
    )


def _account_key(account: ModelAccount) -> tuple[str, str]:
    """The key ``account`` sends and the base URL it may send it to ("" = the account's own).
    Raises CredentialError naming why it cannot be used."""
    # The owner row is read only when a credential is granted to some users, not to all.
    owner = SimpleLazyObject(lambda: account.owner)
    if account.credential:
        credential = credentials.credential_check(
            user=owner,
            name=account.credential,
            provider=account.provider,
            base_url=account.base_url,
        )
        return credential.secret(), credential.base_url
    if account.api_key_encrypted:
        return credentials.api_key_decrypt(account.api_key_encrypted), ""
    if account.legacy_secret_ref:
        credential = credentials.legacy_credential(user=owner, ref=account.legacy_secret_ref)
        if account.base_url and account.base_url.rstrip("/") != credential.base_url:
            raise CredentialError(
                "CREDENTIAL_BASE_URL_MISMATCH",
                f"The key reference {account.legacy_secret_ref!r} may only be sent to "
                f"{credential.base_url}; clear this account's base URL or paste a key.",
            )
        return credential.secret(), credential.base_url
    return "", ""


def account_config(account: ModelAccount) -> AccountConfig:
    """The adapter configuration of ``account``, with its key resolved now, in the worker.
    Raises CredentialError (a ProviderConfigError: nothing is sent) when the key cannot be
    used."""
    api_key, bound_url = (
        ("", "") if account.provider == ModelAccount.Provider.SCRIPTED else _account_key(account)
    )
    # GARDEN_MODEL_CALL_TIMEOUT caps every account: the step's time limits and lock TTL are
    # derived from it, and an account may ask for up to 600 s.
    timeout = min(account.timeout_seconds, settings.GARDEN_MODEL_CALL_TIMEOUT)
    return AccountConfig(
        provider=account.provider,
        model=account.model,
        base_url=bound_url or account.base_url,
        api_key=api_key,
        timeout=timeout,
        options=account.options or {},
        owner_id=account.owner_id,
    )


def account_key_status(account: ModelAccount) -> dict[str, Any]:
    """Where ``account``'s key comes from and whether it can be used now, without the key:
    ``{"source", "credential", "usable", "code", "problem", "label"}``."""
    if account.provider == ModelAccount.Provider.SCRIPTED:
        source, label = "none", "no key (scripted)"
    elif account.credential:
        source, label = "operator", f"operator credential {account.credential!r}"
    elif account.api_key_encrypted:
        source, label = "own", "your key (stored encrypted)"
    elif account.legacy_secret_ref:
        source, label = "legacy", f"legacy reference {account.legacy_secret_ref}"
    else:
        source, label = "none", "no key"
    code = problem = ""
    if account.provider != ModelAccount.Provider.SCRIPTED:
        try:
            key, _ = _account_key(account)
            del key
        except CredentialError as exc:
            code, problem = exc.code, str(exc)
    return {
        "source": source,
        "credential": account.credential or None,
        "usable": not code,
        "code": code or None,
        "problem": problem or None,
        "label": label,
    }


def mcp_server_list(*, owner: AbstractBaseUser) -> QuerySet[McpServer]:
    return McpServer.objects.filter(owner=owner)


# What each role may do in a workspace: ``read`` its rows, ``write`` (rooms, agents, groups),
# ``manage`` (people, accounts and keys, budgets), ``approve`` (decide its approvals; a member
# or viewer may when given the approver right).
WORKSPACE_RIGHTS: dict[str, frozenset[str]] = {
    WorkspaceMember.Role.ADMIN: frozenset({"read", "write", "manage", "approve"}),
    WorkspaceMember.Role.MEMBER: frozenset({"read", "write"}),
    WorkspaceMember.Role.VIEWER: frozenset({"read"}),
}


def workspace_list(*, user: AbstractBaseUser) -> QuerySet[Workspace]:
    """The workspaces the person is in, their own first, each with their ``role`` and
    ``approver`` right and its ``member_count``."""
    mine = WorkspaceMember.objects.filter(workspace=OuterRef("pk"), user=user)
    return (
        Workspace.objects.filter(members__user=user)
        .annotate(
            role=Subquery(mine.values("role")[:1]),
            approver=Subquery(mine.values("approver")[:1]),
            member_count=Count("members", distinct=True),
        )
        .order_by("kind", "name", "id")  # "personal" sorts before "team": their own first
    )


def workspace_membership(*, user: AbstractBaseUser, workspace_id: int) -> WorkspaceMember | None:
    """The person's place in the workspace, or None: another workspace reads as no such one."""
    return (
        WorkspaceMember.objects.filter(user=user, workspace_id=workspace_id)
        .select_related("workspace")
        .first()
    )


def workspace_may(membership: WorkspaceMember | None, right: str) -> bool:
    """Whether the membership carries ``right`` (see WORKSPACE_RIGHTS); no membership, none."""
    if membership is None:
        return False
    if right == "approve" and membership.approver:
        return True
    return right in WORKSPACE_RIGHTS.get(membership.role, frozenset())


def workspaces_where(*, user: AbstractBaseUser, right: str) -> QuerySet[WorkspaceMember]:
    """The ids of the workspaces in which the person has ``right``, as a subquery."""
    roles = [role for role, rights in WORKSPACE_RIGHTS.items() if right in rights]
    found = WorkspaceMember.objects.filter(user=user, role__in=roles)
    if right == "approve":
        found = WorkspaceMember.objects.filter(user=user).filter(
            Q(role__in=roles) | Q(approver=True)
        )
    return found.values("workspace_id")
