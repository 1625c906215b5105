"""A tool call's trusted context, as the loop hands it out, built in one place."""

from __future__ import annotations

from django.db import transaction

from garden.tools import ToolContext
from groups.services.requests import group_conversation_open


def in_group(group, agent, *, output_chars: int = 12_000) -> ToolContext:
    """The context of ``agent``'s tool call in ``group``'s open thread (opened if new)."""
    with transaction.atomic():
        conversation = group_conversation_open(group=group)
    return ToolContext(
        owner_id=group.owner_id,
        agent_id=agent.pk,
        conversation_id=conversation.pk,
        group_id=group.pk,
        output_chars=output_chars,
    )
