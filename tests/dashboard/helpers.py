"""Rows the dashboard's tests build: teammates, a scripted team, a room's turns, artifacts."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from garden.models import Agent, Artifact, Message
from garden.services.accounts import model_account_create
from garden.services.agents import agent_create
from garden.services.conversations import message_append, text_block
from groups import demo
from groups.models import Group
from groups.services.requests import group_conversation_open


def teammate(
    owner,
    handle: str,
    name: str,
    *,
    colour: str = "#c0392b",
    rules: list | None = None,
    runnable: bool = True,
    **extra: Any,
) -> Agent:
    """An agent on its own scripted account (or none, so it cannot run)."""
    account = model_account_create(
        owner=owner,
        name=f"{name} (scripted)",
        provider="scripted",
        model="scripted",
        options={"rules": rules or [], **extra},
    )
    agent = agent_create(
        owner=owner, handle=handle, name=name, model_account=account, colour=colour
    )
    if not runnable:
        Agent.objects.filter(pk=agent.pk).update(model_account=None)
        agent.refresh_from_db()
    return agent


# The seed's first task: Concierge asks Ledger and Finance Advisor, then concludes.
SPENDING = "Review this month's spending and help me decide how much I can save."


def household(owner, *, ledger_delay: float = 0.0) -> Group:
    """The seed's Household finances on scripted models; ``ledger_delay`` keeps Ledger's model
    call busy that long, so a request is mid-flight."""
    group = demo.household_finances(owner)
    if ledger_delay:
        ledger = Agent.objects.get(owner=owner, handle="ledger")
        account = ledger.model_account
        account.options = {**account.options, "delay": ledger_delay}
        account.save(update_fields=["options"])
    return group


SCRIBE_RULES = [
    {"after_tool_error": True, "reply": "Understood: I won't write it."},
    {"after_tool_result": True, "reply": "Saved the summary."},
    {
        "when": "write",
        "reply": {
            "text": "I'll write it down.",
            "tool_calls": [
                {
                    "name": "file.write",
                    "arguments": {
                        "title": "Savings plan",
                        "content": "Save 800 a month by standing order.",
                    },
                }
            ],
        },
    },
]


def team_with_scribe(owner) -> Group:
    """Household finances plus Scribe, whose every file.write waits for the owner's approval."""
    group = household(owner)
    scribe = teammate(owner, "scribe", "Scribe", colour="#16a085", rules=SCRIBE_RULES)
    Agent.objects.filter(pk=scribe.pk).update(
        enabled_tools=["file.write"], approval_tools=["file.write"]
    )
    group.memberships.create(agent=scribe, position=group.memberships.count())
    return group


def say(
    group: Group, *, text: str, speaker: Agent | None = None, channel: str | None = None
) -> Message:
    """Append a turn to the group's open thread (the owner's when ``speaker`` is None).
    ``channel`` sends its event elsewhere, as if the push never reached the page."""
    with transaction.atomic():
        conversation = group_conversation_open(group=group)
        return message_append(
            conversation_id=conversation.pk,
            speaker_kind=Message.SpeakerKind.AGENT if speaker else Message.SpeakerKind.OWNER,
            speaker_agent=speaker,
            content=[text_block(text)],
            channel=channel or f"group-{group.pk}",
        )


def artifact(group: Group, *, agent: Agent, title: str, content: str) -> Artifact:
    with transaction.atomic():
        conversation = group_conversation_open(group=group)
    return Artifact.objects.create(
        owner=group.owner,
        agent=agent,
        conversation=conversation,
        title=title,
        content=content,
        size=len(content),
    )


CAUGHT_UP = "Marker: the page has shown every earlier event."


def caught_up(page: Any, conversation, *, channel: str | None = None) -> None:
    """The positive signal before asserting that a page shows nothing more: append a marker
    turn to ``conversation`` now (its event on ``channel``, the group's for a group's thread)
    and wait until the page shows it. One channel's events reach the page in the order they
    were pushed, so whatever was pushed before the marker (a late draft, a late answer) has
    been shown by then, and its absence means it never came."""
    from playwright.sync_api import expect

    with transaction.atomic():
        message_append(
            conversation_id=conversation.pk,
            speaker_kind=Message.SpeakerKind.OWNER,
            content=[text_block(CAUGHT_UP)],
            channel=channel,
        )
    expect(page.locator("#transcript .turn", has_text=CAUGHT_UP)).to_be_visible()
