"""One Redis configuration for every client garden opens: the Celery broker, the cache (rate
counters, attempt counts), the lock and slot client, the channel layer and the readiness probe.

From the environment:

- ``REDIS_URL``: ``redis://[[user]:password@]host:port/db``, or ``rediss://`` for TLS. With
  Sentinels its host is the name of the master the Sentinels watch (``redis://:pw@mymaster/0``).
- ``GARDEN_REDIS_SENTINELS``: ``host:port,host:port`` — ask these Sentinels where the master is
  (and ask again after a failover); ``GARDEN_REDIS_SENTINEL_PASSWORD`` if they require one.
- ``GARDEN_REDIS_CA_FILE`` (the CA that signed the server's certificate; unset, the system's
  store), ``GARDEN_REDIS_CERT_FILE`` and ``GARDEN_REDIS_KEY_FILE`` (a client certificate).

TLS is always verified, certificate and host name: a URL asking for less (``ssl_cert_reqs=none``)
is refused at start. Every connection is checked before use when idle longer than
``GARDEN_REDIS_HEALTH_CHECK_SECONDS`` and a command that meets a dropped connection is retried on a
new one, so the first command after a Redis restart or failover does not fail.

This module imports nothing of Django's: config/settings.py builds every client's settings from
one ``RedisConfig``, and garden/redis_conn.py its connection pools.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_UNVERIFIED = {"none", "optional", "false", "0", "no"}


@dataclass(frozen=True)
class RedisConfig:
    url: str
    sentinels: tuple[tuple[str, int], ...] = ()
    sentinel_password: str = ""
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    health_check_seconds: int = 10

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("redis", "rediss"):
            raise ImproperlyConfigured(
                f"REDIS_URL must start with redis:// or rediss://, not {parts.scheme or '(none)'}://"
            )
        if not parts.hostname:
            raise ImproperlyConfigured(
                "REDIS_URL names no host (with Sentinels: the master's name)"
            )
        for name, values in parse_qs(parts.query).items():
            if name in ("ssl_cert_reqs", "ssl_check_hostname") and any(
                v.lower() in _UNVERIFIED for v in values
            ):
                raise ImproperlyConfigured(
                    f"REDIS_URL asks for {name}={values[0]}: garden always verifies Redis's "
                    "certificate and host name; give the CA that signed it in GARDEN_REDIS_CA_FILE"
                )
        if self.tls is False and (self.cert_file or self.ca_file):
            raise ImproperlyConfigured(
                "GARDEN_REDIS_CA_FILE or GARDEN_REDIS_CERT_FILE is set but REDIS_URL is redis://: "
                "use rediss:// for TLS"
            )

    @property
    def tls(self) -> bool:
        return urlsplit(self.url).scheme == "rediss"

    @property
    def master(self) -> str:
        """The master's name, with Sentinels."""
        return urlsplit(self.url).hostname or ""

    @property
    def db(self) -> int:
        path = urlsplit(self.url).path.strip("/")
        return int(path) if path.isdigit() else 0

    @property
    def username(self) -> str | None:
        return unquote(urlsplit(self.url).username) if urlsplit(self.url).username else None

    @property
    def password(self) -> str | None:
        return unquote(urlsplit(self.url).password) if urlsplit(self.url).password else None

    # --- redis-py ----------------------------------------------------------------------------

    def tls_options(self) -> dict[str, Any]:
        """redis-py's TLS options: verified against the CA file, else the system's store."""
        if not self.tls:
            return {}
        options: dict[str, Any] = {"ssl_cert_reqs": "required", "ssl_check_hostname": True}
        if self.ca_file:
            options["ssl_ca_certs"] = self.ca_file
        if self.cert_file:
            options["ssl_certfile"] = self.cert_file
        if self.key_file:
            options["ssl_keyfile"] = self.key_file
        return options

    def connection_options(self) -> dict[str, Any]:
        """What every redis-py connection of garden's is made with (sync and asyncio alike)."""
        return {"health_check_interval": self.health_check_seconds, **self.tls_options()}

    def sentinel_options(self) -> dict[str, Any]:
        """How to reach the Sentinels themselves (their password; TLS when the master has it)."""
        options: dict[str, Any] = {"socket_connect_timeout": 5, "socket_timeout": 5}
        if self.sentinel_password:
            options["password"] = self.sentinel_password
        if self.tls:
            options["ssl"] = True
            options.update(self.tls_options())
        return options

    # --- Celery ------------------------------------------------------------------------------

    def broker_url(self) -> str:
        if not self.sentinels:
            return self.url
        auth = ""
        if self.password:
            auth = f"{quote(self.username or '', safe='')}:{quote(self.password, safe='')}@"
        return ";".join(
            f"sentinel://{auth}{host}:{port}/{self.db}" for host, port in self.sentinels
        )

    def broker_transport_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {
            "visibility_timeout": 3600,
            "health_check_interval": self.health_check_seconds,
            "socket_keepalive": True,
            "socket_connect_timeout": 5,
            "retry_on_timeout": True,
        }
        if self.sentinels:
            options["master_name"] = self.master
            options["sentinel_kwargs"] = self.sentinel_options()
        return options

    def broker_use_ssl(self) -> dict[str, Any] | None:
        """kombu's TLS options, always verifying (a bare ``rediss://`` would not)."""
        if not self.tls:
            return None
        return {**self.tls_options(), "ssl_cert_reqs": ssl.CERT_REQUIRED}

    # --- Channels ----------------------------------------------------------------------------

    def channel_host(self) -> dict[str, Any]:
        """One ``hosts`` entry of channels_redis. socket_timeout None: a consumer waits on a
        blocking pop (BZPOPMIN) while its room is quiet, and redis-py's default 5 s read timeout
        would tear every idle websocket down every 5 s (channels_redis#422)."""
        from redis.asyncio.retry import Retry
        from redis.backoff import ExponentialWithJitterBackoff
        from redis.exceptions import ConnectionError, TimeoutError

        host: dict[str, Any] = {
            "socket_timeout": None,
            **self.connection_options(),
            # A push on a connection a restart dropped is sent again on a new one.
            "retry": Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), retries=3),
            "retry_on_error": [ConnectionError, TimeoutError],
        }
        if not self.sentinels:
            return {"address": self.url, **host}
        host.update(
            master_name=self.master,
            sentinels=list(self.sentinels),
            sentinel_kwargs=self.sentinel_options(),
            db=self.db,
        )
        if self.tls:
            from redis.asyncio.sentinel import SentinelManagedSSLConnection

            host["connection_class"] = SentinelManagedSSLConnection
        if self.password:
            host["password"] = self.password
        if self.username:
            host["username"] = self.username
        return host


def _sentinels(value: str) -> tuple[tuple[str, int], ...]:
    found = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ImproperlyConfigured(
                f"GARDEN_REDIS_SENTINELS: {item!r} is not host:port (give host:port,host:port)"
            )
        found.append((host.strip("[]"), int(port)))
    return tuple(found)


def redis_config(env: Any) -> RedisConfig | None:
    """The site's Redis, from the environment; None when REDIS_URL is unset (the embedded
    default: no Redis at all)."""
    url = env.str("REDIS_URL", default="")
    sentinels = env.str("GARDEN_REDIS_SENTINELS", default="")
    if not url:
        if sentinels:
            raise ImproperlyConfigured(
                "GARDEN_REDIS_SENTINELS is set without REDIS_URL: give REDIS_URL with the "
                "master's name as its host (redis://:password@mymaster/0)"
            )
        return None
    return RedisConfig(
        url=url,
        sentinels=_sentinels(sentinels),
        sentinel_password=env.str("GARDEN_REDIS_SENTINEL_PASSWORD", default=""),
        ca_file=env.str("GARDEN_REDIS_CA_FILE", default=""),
        cert_file=env.str("GARDEN_REDIS_CERT_FILE", default=""),
        key_file=env.str("GARDEN_REDIS_KEY_FILE", default=""),
        health_check_seconds=env.int("GARDEN_REDIS_HEALTH_CHECK_SECONDS", default=10),
    )
