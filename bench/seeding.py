"""Groups seeded for the benchmarks and the fault harness: a coordinator and a member whose
agents use the ``openai`` adapter against bench/fake_provider.py, and may use tools of an MCP
server on loopback (bench/fault_mcp.py)."""

from __future__ import annotations

from typing import Any


def _owner_on_fake(username: str, base_url: str, timeout: float):
    """A new owner and its ``openai`` account at ``base_url`` (the fake provider's tag)."""
    from django.contrib.auth import get_user_model

    from garden.services.accounts import model_account_create

    user = get_user_model().objects.create(username=username)
    account = model_account_create(
        owner=user,
        name="fake",
        provider="openai",
        model="fake",
        base_url=base_url,
        timeout_seconds=timeout,
    )
    return user, account


def _mcp_servers_add(user, tools: tuple[str, ...], url: str) -> None:
    """The servers that ``tools`` (``mcp.<server>.<tool>``) name, each at ``url``, added for
    ``user`` as an owner adds one (listed over the network)."""
    from garden.services.mcp import mcp_server_create
    from garden.tools.mcp_catalog import split_name

    for server in dict.fromkeys(split_name(name)[0] for name in tools):
        mcp_server_create(owner=user, name=server, url=url)


def build_agent_chat(
    *,
    username: str,
    base_url: str,
    timeout: float = 30.0,
    tools: tuple[str, ...] = ("memory.recall",),
    approval_tools: tuple[str, ...] = (),
    mcp_url: str = "",
):
    """One agent on the ``openai`` adapter at ``base_url`` and its owner's 1:1 conversation
    with it (the agent's own room runs its requests); it may use ``tools``, those in
    ``approval_tools`` waiting for a person's approval. MCP tools among ``tools`` are of the
    server at ``mcp_url``, under their default approval policy (their annotations). One owner
    per agent, as with ``build_group``."""

    from garden.models import Conversation
    from garden.services.agents import agent_create
    from garden.tools.mcp_catalog import PREFIX

    user, account = _owner_on_fake(username, base_url, timeout)
    _mcp_servers_add(user, tuple(t for t in tools if t.startswith(PREFIX)), mcp_url)
    agent = agent_create(
        owner=user,
        handle="ledger",
        name="Ledger",
        model_account=account,
        enabled_tools=list(tools),
        approval_tools=list(approval_tools),
    )
    return Conversation.objects.create(owner=user, agent=agent)


def build_group(
    *,
    username: str,
    base_url: str,
    timeout: float = 30.0,
    member: str = "ledger",
    approval_tools: tuple[str, ...] = (),
    mcp_tools: tuple[str, ...] = (),
    mcp_url: str = "",
):
    """A group of Concierge (coordinator) and one member, both on the ``openai`` adapter at
    ``base_url``. One owner per group, so each group's accounts carry its own tag. The
    member may use ``approval_tools``, each call waiting for a person's approval, and
    ``mcp_tools`` of the server at ``mcp_url``, under their default approval policy (their
    annotations: a destructive tool waits for approval)."""

    from garden.models import Agent
    from garden.services.agents import agent_builtins_ensure, agent_create
    from groups.models import Group, Membership

    user, account = _owner_on_fake(username, base_url, timeout)
    _mcp_servers_add(user, mcp_tools, mcp_url)
    concierge = agent_builtins_ensure(owner=user)[Agent.Builtin.CONCIERGE]
    concierge.model_account = account
    concierge.save(update_fields=["model_account"])
    group = Group.objects.create(owner=user, name=f"{username} team", coordinator=concierge)
    Membership.objects.create(group=group, agent=concierge, position=0)
    agent = agent_create(
        owner=user,
        handle=member,
        name=member.title(),
        model_account=account,
        enabled_tools=list(mcp_tools),
    )
    if approval_tools:
        Agent.objects.filter(pk=agent.pk).update(
            enabled_tools=[*mcp_tools, *approval_tools], approval_tools=list(approval_tools)
        )
    Membership.objects.create(group=group, agent=agent, position=1)
    return group


def retarget(group, *, base_url: str | None = None, timeout: float | None = None) -> None:
    """Point a group's accounts at another base URL or timeout."""
    from garden.models import ModelAccount

    changes: dict[str, Any] = {}
    if base_url is not None:
        changes["base_url"] = base_url
    if timeout is not None:
        changes["timeout_seconds"] = timeout
    ModelAccount.objects.filter(owner_id=group.owner_id, provider="openai").update(**changes)
