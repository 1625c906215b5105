"""Writes for agents and model accounts, including each owner's built-in agents."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from garden.models import Agent, ModelAccount

SCRIPTED_ACCOUNT_NAME = "Scripted (offline)"
MAKER_TOOLS = ["platform.update_group", "platform.archive_group"]

BUILTINS = {
    Agent.Builtin.MAKER: {
        "handle": "father",
        "name": "Agent Father",
        "colour": "#8a6d3b",
        "instructions": "You are Agent Father, the maker. You create and change agents and groups "
        "for your owner with the platform tools.",
        "enabled_tools": MAKER_TOOLS,
    },
    Agent.Builtin.CONCIERGE: {
        "handle": "concierge",
        "name": "Concierge",
        "colour": "#2e7d6b",
        "instructions": "You are Concierge. You coordinate: interpret the owner's request, ask "
        "members for contributions with group.ask, and bring the results together into one "
        "answer.",
        "enabled_tools": [],
    },
}


def model_account_create(
    *,
    owner: AbstractBaseUser,
    name: str,
    provider: str,
    model: str = "",
    base_url: str = "",
    secret_ref: str = "",
    timeout_seconds: float = 60.0,
    options: dict[str, Any] | None = None,
) -> ModelAccount:
    account = ModelAccount(
        owner=owner, name=name, provider=provider, model=model, base_url=base_url,
        secret_ref=secret_ref, timeout_seconds=timeout_seconds, options=options or {},
    )
    account.full_clean()
    account.save()
    return account


def scripted_account_for(*, owner: AbstractBaseUser) -> ModelAccount:
    """The owner's default offline account (created on first use)."""
    # The owner may have made accounts of the same name; the oldest scripted one is the default.
    account = (ModelAccount.objects.filter(owner=owner, name=SCRIPTED_ACCOUNT_NAME,
                                           provider=ModelAccount.Provider.SCRIPTED)
               .order_by("id").first())
    if account is None:
        account = ModelAccount.objects.create(owner=owner, name=SCRIPTED_ACCOUNT_NAME,
                                              provider=ModelAccount.Provider.SCRIPTED, model="scripted")
    return account


@transaction.atomic
def agent_builtins_ensure(*, owner: AbstractBaseUser) -> dict[str, Agent]:
    """Give ``owner`` Agent Father and Concierge if they lack them; idempotent."""
    account = scripted_account_for(owner=owner)
    found = {}
    for builtin, spec in BUILTINS.items():
        agent = Agent.objects.filter(owner=owner, builtin=builtin).first()
        if agent is None:
            agent = Agent.objects.create(
                owner=owner, builtin=builtin, model_account=account, **spec
            )
        found[builtin] = agent
    return found


def agent_create(
    *,
    owner: AbstractBaseUser,
    handle: str,
    name: str,
    model_account: ModelAccount,
    instructions: str = "",
    colour: str = "#5b8def",
    enabled_tools: list[str] | None = None,
    approval_tools: list[str] | None = None,
    delegation_allowlist: list[Agent] | None = None,
) -> Agent:
    """Create an agent; the caller has validated ownership of ``model_account``."""
    agent = Agent(
        owner=owner, handle=handle, name=name, model_account=model_account,
        instructions=instructions, colour=colour, enabled_tools=enabled_tools or [],
        approval_tools=approval_tools or [],
    )
    agent.full_clean()
    with transaction.atomic():
        agent.save()
        if delegation_allowlist:
            agent.delegation_allowlist.set(delegation_allowlist)
    return agent
