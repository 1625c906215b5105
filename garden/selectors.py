"""Reads. Every selector that takes a user returns only that user's rows."""

from __future__ import annotations

import os

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from garden.models import Agent, Conversation, Message, ModelAccount
from garden.providers.types import AccountConfig, ProviderConfigError


def agent_list(*, owner: AbstractBaseUser, include_removed: bool = False) -> QuerySet[Agent]:
    qs = Agent.objects.filter(owner=owner).select_related("model_account")
    return qs if include_removed else qs.filter(removed_at__isnull=True)


def model_account_list(*, owner: AbstractBaseUser) -> QuerySet[ModelAccount]:
    return ModelAccount.objects.filter(owner=owner)


def conversation_list(*, owner: AbstractBaseUser) -> QuerySet[Conversation]:
    return Conversation.objects.filter(owner=owner, agent__isnull=False).select_related("agent")


def conversation_get(*, owner: AbstractBaseUser, conversation_id: int) -> Conversation | None:
    return conversation_list(owner=owner).filter(pk=conversation_id).first()


def message_list(*, conversation_id: int, after_seq: int = 0, limit: int = 200) -> QuerySet[Message]:
    return (
        Message.objects.filter(conversation_id=conversation_id, seq__gt=after_seq)
        .select_related("speaker_agent")
        .order_by("seq")[:limit]
    )


def account_config(account: ModelAccount) -> AccountConfig:
    """The adapter configuration of ``account``, with its secret resolved now, in the worker.

    ``secret_ref`` of the form ``env:NAME`` reads the environment variable NAME.
    """
    api_key = ""
    if account.secret_ref:
        scheme, _, name = account.secret_ref.partition(":")
        if scheme != "env" or not name:
            raise ProviderConfigError(f"unsupported secret reference {account.secret_ref!r}")
        api_key = os.environ.get(name, "")
        if not api_key:
            raise ProviderConfigError(f"the secret {name} is not set in the worker's environment")
    # GARDEN_MODEL_CALL_TIMEOUT caps every account: the step's time limits and lock TTL are
    # derived from it, and an account may ask for up to 600 s.
    timeout = min(account.timeout_seconds, settings.GARDEN_MODEL_CALL_TIMEOUT)
    return AccountConfig(
        provider=account.provider, model=account.model, base_url=account.base_url,
        api_key=api_key, timeout=timeout, options=account.options or {},
    )
