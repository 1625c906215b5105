"""One Redis configuration for every client (config/redis.py): what it refuses at start, and,
against a real TLS redis-server signed by a private CA made here, that every client verifies
the certificate — with the CA they connect, without it each refuses (never unverified)."""

from __future__ import annotations

import asyncio
import ssl

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured
from kombu import Connection

from config.redis import RedisConfig, redis_config
from garden.redis_conn import build_pool
from tests.support.redis_servers import RedisServer, make_ca


class Env:
    def __init__(self, **values: str) -> None:
        self.values = values

    def str(self, name: str, default: str = "") -> str:
        return self.values.get(name, default)

    def int(self, name: str, default: int = 0) -> int:
        return int(self.values.get(name, default))


def test_no_redis_url_is_the_embedded_default():
    assert redis_config(Env()) is None


@pytest.mark.parametrize(
    "values, named",
    [
        ({"REDIS_URL": "rediss://r:6380/0?ssl_cert_reqs=none"}, "ssl_cert_reqs=none"),
        ({"REDIS_URL": "rediss://r:6380/0?ssl_check_hostname=false"}, "ssl_check_hostname"),
        ({"REDIS_URL": "http://r:6379/0"}, "redis:// or rediss://"),
        ({"GARDEN_REDIS_SENTINELS": "s:26379"}, "without REDIS_URL"),
        ({"REDIS_URL": "redis://m/0", "GARDEN_REDIS_SENTINELS": "s"}, "not host:port"),
        ({"REDIS_URL": "redis://r/0", "GARDEN_REDIS_CA_FILE": "/ca.pem"}, "use rediss://"),
    ],
)
def test_a_configuration_that_would_not_verify_or_cannot_work_is_refused_at_start(values, named):
    with pytest.raises(ImproperlyConfigured, match=named):
        redis_config(Env(**values))


def test_a_bare_rediss_url_verifies_against_the_system_store_in_every_client():
    config = RedisConfig(url="rediss://redis.example:6380/2")
    assert config.tls_options() == {"ssl_cert_reqs": "required", "ssl_check_hostname": True}
    assert config.broker_use_ssl() == {
        "ssl_cert_reqs": ssl.CERT_REQUIRED,
        "ssl_check_hostname": True,
    }
    host = config.channel_host()
    assert host["ssl_cert_reqs"] == "required" and "ssl_ca_certs" not in host


def test_sentinels_name_the_master_for_the_broker_and_the_channel_layer():
    config = RedisConfig(
        url="redis://:pw@gardenmaster/3",
        sentinels=(("10.0.0.1", 26379), ("10.0.0.2", 26380)),
        sentinel_password="s3",
    )
    assert config.broker_url() == (
        "sentinel://:pw@10.0.0.1:26379/3;sentinel://:pw@10.0.0.2:26380/3"
    )
    options = config.broker_transport_options()
    assert options["master_name"] == "gardenmaster"
    assert options["sentinel_kwargs"]["password"] == "s3"
    host = config.channel_host()
    assert host["master_name"] == "gardenmaster" and host["db"] == 3
    assert host["sentinels"] == [("10.0.0.1", 26379), ("10.0.0.2", 26380)]


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls-redis")
    files = make_ca(folder / "ca")
    server = RedisServer(folder / "redis", tls=files)
    server.start()
    yield server, files
    server.stop()


@pytest.mark.parametrize("with_ca", [True, False])
def test_every_client_verifies_the_servers_certificate(settings, tls_server, with_ca):
    server, files = tls_server
    config = RedisConfig(url=server.url(0), ca_file=str(files["ca"]) if with_ca else "")
    settings.GARDEN_REDIS = config

    def cache_and_locks() -> bool:
        pool = build_pool(config.url, max_connections=1, timeout=2, socket_connect_timeout=2)
        try:
            return redis.Redis(connection_pool=pool).ping()
        finally:
            pool.disconnect()

    def broker() -> bool:
        with Connection(
            config.broker_url(),
            transport="garden.broker_redis:Transport",
            transport_options=config.broker_transport_options(),
            ssl=config.broker_use_ssl(),
            connect_timeout=2,
        ) as conn:
            conn.ensure_connection(max_retries=1)
            return conn.connected

    def channel_layer() -> bool:
        from channels_redis.core import RedisChannelLayer

        async def ping() -> bool:
            layer = RedisChannelLayer(hosts=[config.channel_host()])
            try:
                await layer.group_send("tls-probe", {"type": "probe"})
                return True
            finally:
                await layer.flush()
                await layer.close_pools()

        return asyncio.run(ping())

    for client in (cache_and_locks, broker, channel_layer):
        if with_ca:
            assert client() is True, client.__name__
        else:
            with pytest.raises(Exception) as refused:
                client()
            assert _refused_certificate(refused.value), f"{client.__name__}: {refused.value!r}"


def _refused_certificate(exc: BaseException | None) -> bool:
    """Whether the certificate check is what refused, anywhere in the chain of causes."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
