"""The process's event pusher: each channel's events in the order they were pushed, and at
most GARDEN_EVENT_PUSHES_IN_FLIGHT sends to the channel layer under way at once, so a worker
stepping many rooms holds a few connections to the layer, not one per room."""

from __future__ import annotations

import asyncio

from garden import events

ROOMS = 40


class _Counting:
    """A channel layer whose sends take a while, counting those under way at once."""

    def __init__(self) -> None:
        self.now = self.most = 0
        self.sent: list[tuple[str, int]] = []

    async def group_send(self, channel: str, message: dict) -> None:
        self.now += 1
        self.most = max(self.most, self.now)
        await asyncio.sleep(0.01)
        self.sent.append((channel, message["event"]["n"]))
        self.now -= 1


def test_sends_under_way_are_bounded_and_each_rooms_stay_in_order(settings, monkeypatch):
    settings.GARDEN_EVENT_PUSHES_IN_FLIGHT = 3
    layer = _Counting()
    monkeypatch.setattr(events, "get_channel_layer", lambda: layer)
    pusher = events._Pusher()
    for n in range(3):
        for room in range(ROOMS):
            pusher.push(f"group-{room}", {"type": "t", "n": n})
    pusher.wait_until_sent(timeout=30)
    assert len(layer.sent) == 3 * ROOMS
    assert 1 < layer.most <= 3
    for room in range(ROOMS):
        assert [n for c, n in layer.sent if c == f"group-{room}"] == [0, 1, 2]
