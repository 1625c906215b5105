"""@mention parsing and the contribution queue. Pure: plain data in, plain data out."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

MENTION = re.compile(r"(?<![\w@])@([a-zA-Z0-9_-]{1,40})\b")


@dataclass(frozen=True)
class Mentions:
    handles: tuple[str, ...]  # known members, in the order first named
    unknown: tuple[str, ...]  # named handles that are not members


def parse_mentions(text: str, member_handles: set[str]) -> Mentions:
    """Members named with @handle, in the order named (each once), and the unknown ones."""
    seen: list[str] = []
    unknown: list[str] = []
    for match in MENTION.finditer(text):
        handle = match.group(1).lower().rstrip("-_")
        target = seen if handle in member_handles else unknown
        if handle not in target:
            target.append(handle)
    return Mentions(tuple(seen), tuple(unknown))


@dataclass(frozen=True)
class Contribution:
    """One pending member contribution.

    ``call_id`` is the coordinator's group.ask call it answers (None for a mention or a
    member's help request, which answer the room rather than a call).
    """

    agent: int
    source: str  # "mention" | "ask" | "help"
    request: str = ""
    call_id: str | None = None
    asked_by: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Contribution:
        return cls(
            **{k: data.get(k) for k in ("agent", "source", "request", "call_id", "asked_by")}
        )


def queue_after_current(queue: list[Contribution], item: Contribution) -> list[Contribution]:
    """Insert a help request right after the contribution now running (the queue head)."""
    return [*queue[:1], item, *queue[1:]]
