"""Writes for agents, including each owner's built-in agents."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from garden.errors import QuotaExceeded
from garden.models import Agent, ModelAccount
from garden.quotas import quota_hold
from garden.services.accounts import scripted_account_for

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


# New agents take these in turn, so faces in a room tell their speakers apart.
PALETTE = (
    "#5b8def",
    "#c0392b",
    "#8e44ad",
    "#16a085",
    "#d35400",
    "#2c3e50",
    "#b7950b",
    "#1f7a3d",
    "#a93226",
    "#2471a3",
)


def agent_next_colour(*, owner: AbstractBaseUser) -> str:
    """The colour a new agent of ``owner`` gets unless one is chosen."""
    return PALETTE[Agent.objects.filter(owner=owner).count() % len(PALETTE)]


def agent_create(
    *,
    owner: AbstractBaseUser,
    handle: str,
    name: str,
    model_account: ModelAccount,
    instructions: str = "",
    colour: str | None = None,
    enabled_tools: list[str] | None = None,
    approval_tools: list[str] | None = None,
    delegation_allowlist: list[Agent] | None = None,
) -> Agent:
    """Create an agent; the caller has validated ownership of ``model_account``."""
    agent = Agent(
        owner=owner,
        handle=handle,
        name=name,
        model_account=model_account,
        instructions=instructions,
        colour=colour or agent_next_colour(owner=owner),
        enabled_tools=enabled_tools or [],
        approval_tools=approval_tools or [],
    )
    agent.full_clean()
    limit = settings.GARDEN_MAX_AGENTS_PER_OWNER
    with transaction.atomic():
        agent.save()
        if delegation_allowlist:
            agent.delegation_allowlist.set(delegation_allowlist)
        quota_hold(
            owner_id=owner.pk,
            limit=limit,
            count=Agent.objects.filter(owner=owner, removed_at__isnull=True).count,
            refusal=lambda: QuotaExceeded(
                "AGENT_LIMIT",
                f"You have {limit} agents, the limit on this site; remove one to make another.",
            ),
        )
    return agent
