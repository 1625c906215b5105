"""Fixtures for operator messages: a runtime root under tmp_path and an open conversation."""

from __future__ import annotations

from pathlib import Path

import pytest

from garden.models import Agent
from garden.runtime import ENV_GOAL_ID, ENV_GOAL_KIND, ENV_GOAL_ORIGIN, ENV_RUN_ACTOR, ENV_RUN_ID
from garden.services.conversations import conversation_create
from tests.operator_messages.helpers import GARDEN


@pytest.fixture(autouse=True)
def _no_inherited_context(monkeypatch: pytest.MonkeyPatch) -> None:
    # A context in the test runner's own environment would leak into "no context" tests.
    for name in (ENV_GOAL_ID, ENV_RUN_ID, ENV_GOAL_KIND, ENV_RUN_ACTOR, ENV_GOAL_ORIGIN):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def runtime(settings, tmp_path: Path) -> Path:
    root = tmp_path / "runtime"
    settings.GARDEN_RUNTIME_ROOT = root
    settings.GARDEN_NAME = GARDEN
    return root


@pytest.fixture
def conversation(owner):
    agent = Agent.objects.get(owner=owner, handle="concierge")
    return conversation_create(owner=owner, agent=agent, title="Asking the garden")
