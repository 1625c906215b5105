"""Live updates: typed events pushed to a Channels group, only after the transaction commits.

Channels delivers at most once, so every event carries the conversation ``seq`` (when it has
one) and clients re-fetch from the API on reconnect or on a gap.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)


def conversation_channel(conversation_id: int) -> str:
    return f"conversation-{conversation_id}"


def group_channel(group_id: int) -> str:
    return f"group-{group_id}"


def send_event_on_commit(*, channel: str, event: dict[str, Any]) -> None:
    """Push ``event`` to ``channel`` once the current transaction commits (at once if none).

    The payload is round-tripped through JSON here so a non-serialisable event fails at the
    call site, inside the transaction, rather than silently after commit.
    """
    payload = json.loads(json.dumps(event))
    transaction.on_commit(lambda: _send_now_without_waiting_for_commit(channel, payload))


def _send_now_without_waiting_for_commit(channel: str, payload: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(channel, {"type": "garden.event", "event": payload})
    except Exception:  # a dropped push is recovered by the client's re-fetch
        log.warning("event push to %s failed", channel, exc_info=True)
