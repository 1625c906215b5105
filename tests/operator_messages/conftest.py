"""Fixtures for operator messages: an open conversation (the runtime root is the kit's)."""

from __future__ import annotations

import pytest

from garden.models import Agent
from garden.services.conversations import conversation_create


@pytest.fixture
def conversation(owner):
    agent = Agent.objects.get(owner=owner, handle="concierge")
    return conversation_create(owner=owner, agent=agent, title="Asking the garden")
