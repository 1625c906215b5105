"""The kit's fixtures, registered for the whole suite by tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.clock import Clock
from tests.support.driving import drive as _drive
from tests.support.events import PushedEvent, capturing_events


@pytest.fixture
def drive():
    """Inline step driving (tests/support/driving.py): ``drive(request, *states)``."""
    return _drive


@pytest.fixture
def captured_events() -> Iterator[list[PushedEvent]]:
    """Every ``(channel, payload)`` garden pushes during the test, in order."""
    with capturing_events() as pushed:
        yield pushed


@pytest.fixture
def clock(monkeypatch) -> Clock:
    """A ``Clock`` at the real now, patched into its two readers (see ``Clock``)."""
    from django.utils import timezone

    moved = Clock(timezone.now())
    monkeypatch.setattr("groups.services.groups.timezone.now", lambda: moved.now)
    monkeypatch.setattr("garden.budgets._clock", moved.timestamp)
    return moved


# The garden name of every test's runtime (its inbox is <runtime>/inbox/testgarden/).
GARDEN = "testgarden"


@pytest.fixture
def runtime(settings, tmp_path: Path) -> Path:
    """garden's runtime root (runs, inbox) in this test's own folder, under the garden name
    ``GARDEN``."""
    root = tmp_path / "runtime"
    settings.GARDEN_RUNTIME_ROOT = root
    settings.GARDEN_NAME = GARDEN
    return root


@pytest.fixture(autouse=True)
def _no_inherited_run_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run context in the test runner's own environment would leak into the emitters and
    into every "no context" test: none is inherited."""
    from garden.runtime import (
        ENV_GOAL_ID,
        ENV_GOAL_KIND,
        ENV_GOAL_ORIGIN,
        ENV_RUN_ACTOR,
        ENV_RUN_ID,
    )

    for name in (ENV_GOAL_ID, ENV_RUN_ID, ENV_GOAL_KIND, ENV_RUN_ACTOR, ENV_GOAL_ORIGIN):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def signed_in(client, owner):
    """Django's test client signed in as ``owner``."""
    client.force_login(owner)
    return client
