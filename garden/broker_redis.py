"""The broker's transport on Redis: kombu's own (``Transport``, and ``SentinelTransport`` with
Sentinels), with one repair, so that a worker outlives a Redis restart or failover.

When the worker's consumer loses its connection, Celery collects the connection (which detaches
the transport from it: ``transport.client = None``) and then closes it; closing the channel gives
back its unacknowledged messages, which needs the connection's address, read from
``transport.client``. The AttributeError that follows is not a connection error, so nothing
catches it and the worker exits ("Unrecoverable error: AttributeError(... 'hostname')"); a
task still running then fails again when it acknowledges. Here each channel keeps the
connection it was opened for and reads the address from it when the transport has let it go:
the messages are given back (or the attempt fails as a connection error, which is ignored) and
the consumer reconnects.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis


class _KeepsConnection:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._opened_for = self.connection.client

    def _get_pool(self, asynchronous: bool = False) -> Any:
        transport = self.connection
        if transport.client is not None or self._opened_for is None:
            return super()._get_pool(asynchronous)
        transport.client = self._opened_for
        try:
            return super()._get_pool(asynchronous)
        finally:
            transport.client = None


class Channel(_KeepsConnection, kombu_redis.Channel):
    pass


class SentinelChannel(_KeepsConnection, kombu_redis.SentinelChannel):
    pass


class Transport(kombu_redis.Transport):
    Channel = Channel


class SentinelTransport(kombu_redis.SentinelTransport):
    Channel = SentinelChannel
