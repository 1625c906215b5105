"""Reads of notifications: an owner's channels and mutes, the agents the settings list, and the
reply turns of a request."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser

from garden.models import Agent, Message
from notifications.models import AgentMute, NotificationSettings
from notifications.payloads import reply_text

# A request's agent turns are bounded by its budget (twelve calls, each a turn and its
# results); this bounds the read whatever the rows say.
MAX_TURNS_READ = 200


@dataclass(frozen=True)
class Channels:
    browser: bool
    telegram: bool


def channels_get(*, owner_id: int) -> Channels:
    """The owner's channels: their row, or the defaults (browser on, Telegram off)."""
    row = NotificationSettings.objects.filter(owner_id=owner_id).values_list("browser", "telegram")
    found = row.first()
    if found is None:
        default = NotificationSettings()
        return Channels(browser=default.browser, telegram=default.telegram)
    return Channels(browser=found[0], telegram=found[1])


def muted_agent_ids(*, owner_id: int) -> set[int]:
    return set(AgentMute.objects.filter(owner_id=owner_id).values_list("agent_id", flat=True))


def notification_agents(*, owner: AbstractBaseUser) -> list[Agent]:
    """Every live agent of the owner, each with ``muted`` set: the list the settings show."""
    muted = muted_agent_ids(owner_id=owner.pk)
    agents = list(Agent.objects.filter(owner=owner, removed_at__isnull=True).order_by("name", "pk"))
    for agent in agents:
        agent.muted = agent.pk in muted
    return agents


def reply_turns(*, request_id: int) -> list[tuple[Message, str]]:
    """The request's finished replies in the order they were said, each with its text: an
    agent's turn with visible text and no tool call or result (``payloads.reply_text``)."""
    turns = (
        Message.objects.filter(
            request_id=request_id,
            speaker_kind=Message.SpeakerKind.AGENT,
            kind=Message.Kind.TURN,
        )
        .select_related("speaker_agent")
        .order_by("pk")[:MAX_TURNS_READ]
    )
    found = []
    for turn in turns:
        text = reply_text(turn.content)
        if text and turn.speaker_agent_id is not None:
            found.append((turn, text))
    return found
