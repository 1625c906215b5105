"""A real PgBouncer in transaction mode (Debian's package) in front of the test machine's
PostgreSQL, on a free loopback port, for the tests of garden behind a transaction pooler."""

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

import pytest
from django.db import connection


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def pgbouncer(*, idle_transaction_timeout: int = 0) -> Iterator[int]:
    """PgBouncer's port: every database of this test run's PostgreSQL server, pooled per
    transaction as a managed pooler does (no startup parameters, no session state)."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(binary).exists():
        if os.environ.get("GARDEN_REQUIRE_SERVICES") == "1":
            pytest.fail("pgbouncer is not installed (apt-get install pgbouncer)")
        pytest.skip("pgbouncer is not installed")
    server = connection.settings_dict
    port = _free_port()
    home = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    home.chmod(0o777)
    (home / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server['HOST'] or '127.0.0.1'} port={server['PORT'] or 5432} "
        f"user={server['USER'] or 'postgres'}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        "auth_type = any\npool_mode = transaction\n"
        "max_client_conn = 200\ndefault_pool_size = 10\n"
        f"idle_transaction_timeout = {idle_transaction_timeout}\n"
        f"logfile = {home}/pgbouncer.log\npidfile = {home}/pgbouncer.pid\n"
    )
    # PgBouncer will not run as root: -u drops to the database's system user.
    user = ["-u", "postgres"] if os.geteuid() == 0 else []
    process = subprocess.Popen([binary, *user, str(home / "pgbouncer.ini")])
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log = (
                        (home / "pgbouncer.log").read_text()
                        if (home / "pgbouncer.log").exists()
                        else ""
                    )
                    pytest.fail(f"pgbouncer did not start: {log[-2000:]}")
                time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(home, ignore_errors=True)
