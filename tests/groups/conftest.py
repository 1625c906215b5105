"""Fixtures for the group loop: a group of scripted agents built per test."""

from __future__ import annotations

import pytest

from garden.models import Agent
from garden.services.accounts import model_account_create
from garden.services.agents import agent_builtins_ensure, agent_create
from groups.models import Group, Membership
from tests.garden.providers.httpserver import ScriptedServer


def scripted(owner, name: str, rules: list, default: str = "ok", **extra):
    return model_account_create(
        owner=owner,
        name=name,
        provider="scripted",
        model="scripted",
        options={"rules": rules, "default": default, **extra},
    )


def make_group(
    owner,
    *,
    concierge_rules: list,
    members: dict[str, list],
    concierge_default: str = "Done.",
    name: str = "Team",
) -> Group:
    """A group with Concierge as coordinator and one scripted member per ``members`` entry."""
    concierge = agent_builtins_ensure(owner=owner)[Agent.Builtin.CONCIERGE]
    concierge.model_account = scripted(
        owner, "concierge-script", concierge_rules, concierge_default
    )
    concierge.save(update_fields=["model_account"])
    group = Group.objects.create(owner=owner, name=name, coordinator=concierge)
    Membership.objects.create(group=group, agent=concierge, position=0)
    for i, (handle, rules) in enumerate(members.items(), start=1):
        agent = Agent.objects.filter(owner=owner, handle=handle).first() or agent_create(
            owner=owner,
            handle=handle,
            name=handle.title(),
            model_account=scripted(owner, handle, rules),
        )
        Membership.objects.create(group=group, agent=agent, position=i)
    return group


# Ledger's write, which waits for approval in ``writing_group``, and Concierge's ask of it.
WRITE = {
    "name": "file.write",
    "arguments": {"title": "Savings plan", "content": "Save 800 a month."},
}
ASK_LEDGER = {
    "name": "group.ask",
    "arguments": {"member": "ledger", "request": "Write the plan down."},
}


@pytest.fixture
def writing_group(group_factory, owner):
    """Concierge asks Ledger, who writes the plan with file.write, which needs approval."""
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "The plan is written."},
            {"reply": {"tool_calls": [ASK_LEDGER]}},
        ],
        members={
            "ledger": [
                {"after_tool_result": True, "reply": "Saved the plan."},
                {"reply": {"text": "Writing it.", "tool_calls": [WRITE]}},
            ]
        },
    )
    Agent.objects.filter(owner=owner, handle="ledger").update(
        enabled_tools=["file.write"], approval_tools=["file.write"]
    )
    return group


@pytest.fixture
def group_factory(owner):
    def build(**kwargs):
        return make_group(owner, **kwargs)

    return build


@pytest.fixture
def provider_server(loopback_providers):
    """A real local HTTP server that agents can use as their model endpoint (see
    tests/groups/helpers.py); it records every request it receives."""
    server = ScriptedServer()
    yield server
    server.close()
