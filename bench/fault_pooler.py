"""A real PgBouncer (Debian's package) in transaction mode in front of a PostgreSQL server, on a
free loopback port, lending a server session for one transaction at a time as a managed pooler
does: what the fault harness runs its workers through with ``--pgbouncer``, and the tests of
garden behind a transaction pooler (tests/support/pgbouncer.py)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class PgBouncerMissing(RuntimeError):
    """No pgbouncer binary on this machine (``apt-get install pgbouncer``)."""


class PgBouncerFailed(RuntimeError):
    """PgBouncer did not start; the message ends with its log."""


def pgbouncer_binary() -> str | None:
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    return binary if Path(binary).exists() else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def pgbouncer_server(
    *,
    host: str = "127.0.0.1",
    port: int = 5432,
    user: str = "postgres",
    idle_transaction_timeout: int = 0,
    pool_size: int = 10,
) -> Iterator[int]:
    """PgBouncer's port: every database of the PostgreSQL server at ``host``:``port`` (as
    ``user``), pooled per transaction with ``pool_size`` server sessions per database (no
    startup parameters, no session state); a client idle in a transaction for
    ``idle_transaction_timeout`` seconds (0: never) is disconnected. Raises PgBouncerMissing
    or PgBouncerFailed."""
    binary = pgbouncer_binary()
    if binary is None:
        raise PgBouncerMissing("pgbouncer is not installed (apt-get install pgbouncer)")
    listen = _free_port()
    home = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    home.chmod(0o777)
    (home / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={host} port={port} user={user}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {listen}\nunix_socket_dir =\n"
        "auth_type = any\npool_mode = transaction\n"
        f"max_client_conn = 400\ndefault_pool_size = {pool_size}\n"
        f"idle_transaction_timeout = {idle_transaction_timeout}\n"
        f"logfile = {home}/pgbouncer.log\npidfile = {home}/pgbouncer.pid\n"
    )
    # PgBouncer will not run as root: -u drops to the database's system user.
    drop = ["-u", "postgres"] if os.geteuid() == 0 else []
    # Its log goes to the logfile (read back when it fails to start), not to the caller's
    # output: a dropped server session is a warning line in it, many per fault trial.
    process = subprocess.Popen(
        [binary, *drop, str(home / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", listen), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log = home / "pgbouncer.log"
                    text = log.read_text() if log.exists() else ""
                    raise PgBouncerFailed(f"pgbouncer did not start: {text[-2000:]}") from None
                time.sleep(0.05)
        yield listen
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(home, ignore_errors=True)
