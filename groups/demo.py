"""The seed's scenario on scripted models: "Household finances" with Concierge, Ledger and
Finance Advisor — the one definition of the starter team (``HOUSEHOLD_FINANCES``), made by
``manage.py demo``, by the dashboard's **Create the Household finances team** and by the
tests of the loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from garden.models import Agent
from garden.services.accounts import model_account_create, scripted_account_for
from garden.services.agents import agent_builtins_ensure, agent_create, agent_update
from garden.services.maker_script import MAKE_AGENT_RULE, MAKER_RESULT_RULES, UNDERSTOOD
from groups.models import Group, Membership

CONCIERGE_SCRIPT = {
    "rules": [
        # A member's contribution that did not come is said, never papered over.
        {
            "after_tool_error": True,
            "reply": "I could not bring the team's answers together: {error}",
        },
        {
            "after_tool_result": True,
            "reply": "Here is where you stand. Ledger's figures: income 4,200, spending 3,150, so "
            "1,050 left this month. Finance Advisor suggests keeping a 250 buffer. "
            "Recommendation: save 800 a month by standing order on payday, and revisit "
            "eating out (310) if you want to reach 1,000.",
        },
        {
            "when": r"exclud",
            "reply": "Updated: without the 240 reimbursement, spending is 2,910 and 1,290 is left. "
            "You can raise the monthly saving to 1,000 and keep a 290 buffer.",
        },
        {
            # The owner's question, not a member's words ("Saved the plan …") or a file's name.
            "when": r"spending|can i save|i can save|budget",
            "reply": {
                "text": "I'll ask Ledger for the figures and Finance Advisor for a plan.",
                "tool_calls": [
                    {
                        "name": "group.ask",
                        "arguments": {
                            "member": "ledger",
                            "request": "Analyse this month's transactions.",
                        },
                    },
                    {
                        "name": "group.ask",
                        "arguments": {
                            "member": "advisor",
                            "request": "Suggest how much can be saved each month.",
                        },
                    },
                ],
            },
        },
    ],
    "default": "Noted. Tell me what you'd like the team to look at.",
}

LEDGER_SCRIPT = {
    "rules": [
        # Asked to remember something, it uses its memory tool (in a group, the group's
        # memory), then says what the tool answered: a failure as a failure.
        {"after_tool_error": True, "reply": "I couldn't note that: {error}"},
        {
            "after_tool_result": True,
            "reply": "Noted: rent is 1,400 a month. I'll use it from now on.",
        },
        {
            "when": r"remember",
            "reply": {
                "text": "I'll keep that in my notes.",
                "tool_calls": [
                    {"name": "memory.remember", "arguments": {"text": "Rent is 1,400 a month."}}
                ],
            },
        },
        {
            "when": r"exclud",
            "reply": "Excluding the 240 work reimbursement: spending 2,910, net 1,290.",
        },
        {
            "when": r"transactions|spending",
            "reply": "This month: income 4,200; spending 3,150 (rent 1,400, groceries 520, "
            "transport 180, eating out 310, subscriptions 90, other 650 incl. a 240 work "
            "reimbursement not yet repaid). Net 1,050.",
        },
    ],
    "default": "Ledger: nothing to add.",
}

ADVISOR_SCRIPT = {
    "rules": [
        {
            "when": r"save|plan",
            "reply": "Keep a 250 buffer for irregular costs; automate the rest of the surplus "
            "into savings on payday.",
        },
    ],
    "default": "Advisor: nothing to add.",
}


@dataclass(frozen=True)
class TeamAgent:
    """One agent of a scripted team: who it is, what it may use, and its offline script. Every
    tool its script calls is among ``enabled_tools`` (a test holds every team to it)."""

    handle: str
    name: str
    colour: str
    instructions: str
    script: dict[str, Any]
    enabled_tools: tuple[str, ...] = ()
    approval_tools: tuple[str, ...] = ()


@dataclass(frozen=True)
class StarterTeam:
    """A group of scripted agents coordinated by the owner's Concierge (whose instructions and
    tools are the built-in's; it takes ``coordinator_script`` when it is offline)."""

    name: str
    coordinator_script: dict[str, Any]
    members: tuple[TeamAgent, ...]


HOUSEHOLD_FINANCES = StarterTeam(
    name="Household finances",
    coordinator_script=CONCIERGE_SCRIPT,
    members=(
        TeamAgent(
            handle="ledger",
            name="Ledger",
            colour="#c0392b",
            instructions="You keep the household ledger.",
            script=LEDGER_SCRIPT,
            enabled_tools=("memory.remember",),
        ),
        TeamAgent(
            handle="advisor",
            name="Finance Advisor",
            colour="#8e44ad",
            instructions="You advise on saving and budgets.",
            script=ADVISOR_SCRIPT,
        ),
    ),
)


def maker_script(*, group_id: int, name: str) -> dict:
    """Agent Father's offline script for the demo: asked to rename, it calls
    platform.update_group on group ``group_id`` (which waits for the owner's approval), then
    reports what the tool answered; it still makes an agent by name, as its own script does."""
    return {
        "rules": [
            MAKER_RESULT_RULES[0],  # an error, said as one
            {
                "after_tool_result": True,
                "reply": "Done: the group is now called {result.group.name}.",
            },
            *MAKER_RESULT_RULES[1:],
            MAKE_AGENT_RULE,
            {
                "when": "rename",
                "reply": {
                    "text": f"I'll rename it to {name}; that needs your approval.",
                    "tool_calls": [
                        {
                            "name": "platform.update_group",
                            "arguments": {"group_id": group_id, "name": name},
                        }
                    ],
                },
            },
        ],
        "default": UNDERSTOOD,
    }


@transaction.atomic
def trip_group(owner: AbstractBaseUser) -> Group:
    """A second demo group (Ledger and Finance Advisor, Concierge coordinating) for Agent
    Father to rename; the household's agents must exist (``household_finances``)."""
    group = (
        Group.objects.filter(
            owner=owner,
            kind=Group.Kind.TEAM,
            name__in=["Trip planning", "Summer trip"],
            deleted_at__isnull=True,
        )
        .order_by("id")
        .first()
    )
    if group is None:
        agents = {a.handle: a for a in Agent.objects.filter(owner=owner)}
        group = Group.objects.create(
            owner=owner, name="Trip planning", coordinator=agents["concierge"]
        )
        for i, handle in enumerate(("concierge", "ledger", "advisor")):
            Membership.objects.create(group=group, agent=agents[handle], position=i)
    return group


@transaction.atomic
def household_finances(owner: AbstractBaseUser, *, pace: float = 0.0) -> Group:
    """Create (or reuse) the starter team and its group for ``owner``, as ``HOUSEHOLD_FINANCES``
    defines them. ``pace`` (seconds) makes each scripted answer take that long, written in
    pieces, so a person can watch the team work."""
    team = HOUSEHOLD_FINANCES
    builtins = agent_builtins_ensure(owner=owner)

    def paced(script: dict) -> dict:
        return {**script, "delay": pace} if pace else script

    concierge = builtins[Agent.Builtin.CONCIERGE]
    account = concierge.model_account
    # Concierge's offline account learns the team's script; an account its owner put on a
    # real model is left as it is. The offline account every new agent starts on is shared
    # (any agent added later, one Agent Father makes): Concierge gets a script of its own
    # instead, so other agents do not start speaking the household's lines.
    if account is not None and account.provider == "scripted":
        shared = scripted_account_for(owner=owner)
        if account.pk == shared.pk or account.agents.exclude(pk=concierge.pk).exists():
            concierge.model_account = model_account_create(
                owner=owner,
                name="Concierge's script",
                provider="scripted",
                model="scripted",
                options=paced(team.coordinator_script),
            )
            concierge.save(update_fields=["model_account"])
        else:
            account.options = paced(team.coordinator_script)
            account.save(update_fields=["options"])

    def member(spec: TeamAgent) -> Agent:
        agent = Agent.objects.filter(owner=owner, handle=spec.handle).first()
        if agent is None:
            return agent_create(
                owner=owner,
                handle=spec.handle,
                name=spec.name,
                model_account=model_account_create(
                    owner=owner,
                    name=f"{spec.name}'s script",
                    provider="scripted",
                    model="scripted",
                    options=paced(spec.script),
                ),
                colour=spec.colour,
                instructions=spec.instructions,
                enabled_tools=list(spec.enabled_tools),
                approval_tools=list(spec.approval_tools),
            )
        missing = [t for t in spec.enabled_tools if t not in agent.enabled_tools]
        if missing and agent.removed_at is None:
            # An agent of an earlier run of the team, made before its script used these.
            agent = agent_update(agent=agent, enabled_tools=[*agent.enabled_tools, *missing])
        return agent

    agents = [concierge, *(member(spec) for spec in team.members)]
    group = Group.objects.filter(owner=owner, name=team.name, deleted_at__isnull=True).first()
    if group is None:
        group = Group.objects.create(owner=owner, name=team.name, coordinator=concierge)
        for i, agent in enumerate(agents):
            Membership.objects.create(group=group, agent=agent, position=i)
    return group
