"""Fixtures for missions: a runtime root under tmp_path, scripted agents, a mission maker."""

from __future__ import annotations

from pathlib import Path

import pytest

from garden.runtime import ENV_GOAL_ID, ENV_GOAL_KIND, ENV_GOAL_ORIGIN, ENV_RUN_ACTOR, ENV_RUN_ID
from garden.services.accounts import model_account_create
from garden.services.agents import agent_create
from missions.services import Schedule, mission_create

GARDEN = "testgarden"
EVERY_HOUR = Schedule(every_seconds=3600)


@pytest.fixture(autouse=True)
def _no_inherited_context(monkeypatch: pytest.MonkeyPatch) -> None:
    # A run context in the test runner's own environment would leak into the emitters.
    for name in (ENV_GOAL_ID, ENV_RUN_ID, ENV_GOAL_KIND, ENV_RUN_ACTOR, ENV_GOAL_ORIGIN):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def runtime(settings, tmp_path: Path) -> Path:
    root = tmp_path / "runtime"
    settings.GARDEN_RUNTIME_ROOT = root
    settings.GARDEN_NAME = GARDEN
    return root


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
