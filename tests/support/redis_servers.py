"""A test's own redis-server on a free loopback port, plain or TLS (a private CA made here with
openssl, its server certificate for 127.0.0.1 and localhost), and a real Sentinel watching it;
each can be stopped and started again. Nothing is kept on disk, so a restart loses every key,
as a managed Redis's restart or failover does."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

MASTER = "gardenmaster"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_ca(folder: Path) -> dict[str, Path]:
    """A private CA and a server certificate it signed for 127.0.0.1 and localhost."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, ca, key, csr, cert = (
        folder / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem")
    )
    ext = folder / "san.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")

    def openssl(*args: str | Path) -> None:
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
            "-days", "2", "-subj", "/CN=garden test CA")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
            "-subj", "/CN=127.0.0.1")  # fmt: skip
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
            "-out", cert, "-days", "2", "-extfile", ext)  # fmt: skip
    return {"ca": ca, "cert": cert, "key": key}


class _Server:
    process: subprocess.Popen | None = None
    port: int

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None
        _wait_port(self.port, up=False)


class RedisServer(_Server):
    """redis-server on 127.0.0.1:``port``; with ``tls`` (make_ca's files) it speaks TLS only."""

    def __init__(self, folder: Path, *, tls: dict[str, Path] | None = None) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("redis-server is not installed")
        self.folder, self.tls, self.port = folder, tls, _free_port()
        folder.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen | None = None

    def url(self, db: int = 0) -> str:
        return f"{'rediss' if self.tls else 'redis'}://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        args = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", self.folder]
        if self.tls:
            args += ["--port", "0", "--tls-port", str(self.port),
                     "--tls-cert-file", self.tls["cert"], "--tls-key-file", self.tls["key"],
                     "--tls-ca-cert-file", self.tls["ca"], "--tls-auth-clients", "no"]  # fmt: skip
        else:
            args += ["--port", str(self.port)]
        log = open(self.folder / "redis.log", "a")
        self.process = subprocess.Popen(["redis-server", *map(str, args)], stdout=log, stderr=log)
        _wait_port(self.port, up=True)

    def restart(self, down_for: float = 2.0) -> None:
        self.stop()
        time.sleep(down_for)
        self.start()


class SentinelServer(_Server):
    """``redis-server --sentinel`` watching ``master`` as MASTER."""

    def __init__(self, folder: Path, master: RedisServer) -> None:
        self.folder, self.master, self.port = folder, master, _free_port()
        folder.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        config = self.folder / "sentinel.conf"
        lines = [
            "bind 127.0.0.1",
            f"port {self.port}",
            f"dir {self.folder}",
            f"sentinel monitor {MASTER} 127.0.0.1 {self.master.port} 1",
            f"sentinel down-after-milliseconds {MASTER} 2000",
        ]
        if self.master.tls:
            tls = self.master.tls
            lines += [
                "port 0",
                f"tls-port {self.port}",
                f"tls-cert-file {tls['cert']}",
                f"tls-key-file {tls['key']}",
                f"tls-ca-cert-file {tls['ca']}",
                "tls-auth-clients no",
                "tls-replication yes",
            ]
        config.write_text("\n".join(lines) + "\n")
        log = open(self.folder / "sentinel.log", "a")
        self.process = subprocess.Popen(
            ["redis-server", str(config), "--sentinel"], stdout=log, stderr=log
        )
        _wait_port(self.port, up=True)


def _wait_port(port: int, *, up: bool, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                if up:
                    return
        except OSError:
            if not up:
                return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} did not come {'up' if up else 'down'} in {timeout} s")


@contextmanager
def redis_stack(folder: Path, mode: str) -> Iterator[tuple[RedisServer, dict[str, str]]]:
    """A private Redis for ``mode`` (``plain``, ``tls`` or ``sentinel``) and the environment
    that points garden at it; stopped at the end."""
    tls = make_ca(folder / "ca") if mode == "tls" else None
    server = RedisServer(folder / "redis", tls=tls)
    server.start()
    sentinel = None
    env = {"REDIS_URL": server.url(1)}
    if tls:
        env["GARDEN_REDIS_CA_FILE"] = str(tls["ca"])
    if mode == "sentinel":
        sentinel = SentinelServer(folder / "sentinel", server)
        sentinel.start()
        env = {
            "REDIS_URL": f"redis://{MASTER}/1",
            "GARDEN_REDIS_SENTINELS": f"127.0.0.1:{sentinel.port}",
        }
    try:
        yield server, env
    finally:
        if sentinel is not None:
            sentinel.stop()
        server.stop()
