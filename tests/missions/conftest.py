"""Fixtures for missions: scripted agents, a mission maker (the runtime root is the kit's)."""

from __future__ import annotations

from pathlib import Path

from garden.services.accounts import model_account_create
from garden.services.agents import agent_create
from missions.services import Schedule, mission_create
from tests.support.fixtures import GARDEN

EVERY_HOUR = Schedule(every_seconds=3600)


def notes(root: Path) -> list[str]:
    folder = root / "inbox" / GARDEN / "notes"
    return sorted(p.read_text() for p in folder.glob("*.md")) if folder.exists() else []


def reply_copies(root: Path) -> list[str]:
    folder = root / "inbox" / GARDEN
    return sorted(p.read_text() for p in folder.glob("*.md")) if folder.exists() else []


def scripted_agent(owner, handle: str, rules: list, default: str = "ok", **fields):
    account = model_account_create(
        owner=owner,
        name=f"{handle}-script",
        provider="scripted",
        model="scripted",
        options={"rules": rules, "default": default},
    )
    return agent_create(
        owner=owner, handle=handle, name=handle.title(), model_account=account, **fields
    )


def make_mission(
    owner,
    target,
    *,
    prompt: str = "Review this week's spending.",
    schedule: Schedule = EVERY_HOUR,
    origin=None,
    name: str = "Weekly review",
    enabled: bool = True,
):
    from groups.models import Group

    return mission_create(
        owner=owner,
        name=name,
        prompt=prompt,
        target_type="group" if isinstance(target, Group) else "agent",
        target_id=target.pk,
        schedule=schedule,
        enabled=enabled,
        origin_conversation_id=origin.pk if origin is not None else None,
    )
