"""What a projection is made from: a stored turn of a group's shared transcript, with its
trusted speaker metadata, and plain views of the agent projected and of its group."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from garden.providers.types import Block

SpeakerKind = Literal["owner", "agent", "garden"]


@dataclass(frozen=True)
class AgentView:
    id: int
    handle: str
    name: str
    instructions: str = ""


@dataclass(frozen=True)
class GroupView:
    id: int
    name: str
    coordinator_id: int
    members: tuple[AgentView, ...]
    # An agent's own room: the owner and one agent, no group framing and no group tools.
    solo: bool = False


@dataclass(frozen=True)
class Turn:
    """One stored turn; the speaker fields are trusted metadata, never read from the content."""

    seq: int
    speaker_kind: SpeakerKind
    speaker_agent_id: int | None
    speaker_handle: str | None
    content: tuple[Block, ...]
    kind: str = "turn"
    addressed_agent_id: int | None = None
    reply_to_call_id: str | None = None
    # The username of the person who said a person turn (trusted metadata, like the speaker):
    # once more than one person has spoken in the room, each such turn is attributed by it.
    speaker_person: str | None = None
    # How the turn reads as room context, by the room's handles (see
    # ``groups.domain.rendering.rendered_blocks``), and the least room it takes when bounded
    # (``groups.domain.bounding.least_chars``): a turn kept from step to step is rendered and
    # measured once, however often the room is projected.
    rendered: dict = field(default_factory=dict, compare=False, repr=False)
