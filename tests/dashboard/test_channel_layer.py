"""The Redis channel layer as configured: a consumer's receive may wait on a quiet room for
longer than redis-py's default read timeout (5 s) without the connection failing."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import get_channel_layer

pytestmark = pytest.mark.redis


def test_a_receive_on_a_quiet_channel_outlasts_the_client_read_timeout():
    layer = get_channel_layer()
    assert type(layer).__name__ == "RedisChannelLayer"

    async def wait_then_deliver() -> dict:
        channel = await layer.new_channel()
        with pytest.raises(TimeoutError):  # our own limit, not Redis's
            await asyncio.wait_for(layer.receive(channel), timeout=6.5)
        await layer.send(channel, {"type": "garden.event", "event": {"type": "ping"}})
        received = await asyncio.wait_for(layer.receive(channel), timeout=5)
        return received

    assert asyncio.run(wait_then_deliver())["event"] == {"type": "ping"}
