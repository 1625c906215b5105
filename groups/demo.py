"""The seed's scenario on scripted models: "Household finances" with Concierge, Ledger and
Finance Advisor. Used by ``manage.py demo`` and by the tests of the loop."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from garden.models import Agent
from garden.services.accounts import model_account_create
from garden.services.agents import agent_builtins_ensure, agent_create
from groups.models import Group, Membership

CONCIERGE_SCRIPT = {
    "rules": [
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
        # Its 1:1 chat: asked to remember something, it uses its memory tool, then says so.
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


def maker_script(*, group_id: int, name: str) -> dict:
    """Agent Father's offline script for the demo: asked to rename, it calls
    platform.update_group on group ``group_id`` (which waits for the owner's approval), then
    reports what the tool answered."""
    return {
        "rules": [
            {"after_tool_error": True, "reply": "That did not go through; nothing was changed."},
            {"after_tool_result": True, "reply": f"Done: the group is now called {name}."},
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
        "default": "Tell me which agent or group to make or change.",
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
    """Create (or reuse) the demo team and group for ``owner``. ``pace`` (seconds) makes each
    scripted answer take that long, written in pieces, so a person can watch the team work."""
    builtins = agent_builtins_ensure(owner=owner)

    def paced(script: dict) -> dict:
        return {**script, "delay": pace} if pace else script

    concierge = builtins[Agent.Builtin.CONCIERGE]
    account = concierge.model_account
    # Concierge's offline account learns the team's script; an account its owner put on a
    # real model is left as it is. The offline account every new agent starts on is shared
    # (Agent Father's, and any agent added later): Concierge gets a script of its own instead,
    # so other agents do not start speaking the household's lines.
    if account is not None and account.provider == "scripted":
        if account.agents.exclude(pk=concierge.pk).exists():
            concierge.model_account = model_account_create(
                owner=owner,
                name="Concierge's script",
                provider="scripted",
                model="scripted",
                options=paced(CONCIERGE_SCRIPT),
            )
            concierge.save(update_fields=["model_account"])
        else:
            account.options = paced(CONCIERGE_SCRIPT)
            account.save(update_fields=["options"])

    def member(handle: str, name: str, colour: str, script: dict, instructions: str) -> Agent:
        agent = Agent.objects.filter(owner=owner, handle=handle).first()
        if agent is None:
            acct = model_account_create(
                owner=owner,
                name=f"{name}'s script",
                provider="scripted",
                model="scripted",
                options=paced(script),
            )
            agent = agent_create(
                owner=owner,
                handle=handle,
                name=name,
                model_account=acct,
                colour=colour,
                instructions=instructions,
            )
        return agent

    ledger = member("ledger", "Ledger", "#c0392b", LEDGER_SCRIPT, "You keep the household ledger.")
    advisor = member(
        "advisor", "Finance Advisor", "#8e44ad", ADVISOR_SCRIPT, "You advise on saving and budgets."
    )
    group = Group.objects.filter(
        owner=owner, name="Household finances", deleted_at__isnull=True
    ).first()
    if group is None:
        group = Group.objects.create(owner=owner, name="Household finances", coordinator=concierge)
        for i, agent in enumerate((concierge, ledger, advisor)):
            Membership.objects.create(group=group, agent=agent, position=i)
    return group
