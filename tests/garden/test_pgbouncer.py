"""garden behind PgBouncer in transaction mode, what managed poolers force: with
GARDEN_DB_TRANSACTION_POOLER it connects (no startup options, no server-side cursors, no
prepared statements), garden.W009 says when the server's idle-in-transaction timeout is off,
and with it set on the database an idle transaction's row lock is ended by the server; the
group loop, the 1:1 loop, tend and beat's lease run through it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time

import psycopg
import pytest
from django.db import connection

from tests.support.pgbouncer import pgbouncer
from tests.support.processes import ROOT, manage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def database():
    """A database of its own on the test server (its settings are this test's to change)."""
    if connection.vendor != "postgresql":
        pytest.skip("PgBouncer pools PostgreSQL")
    name = f"garden_pgbouncer_{os.getpid()}"
    server = connection.settings_dict
    admin = dict(
        host=server["HOST"] or "127.0.0.1",
        port=server["PORT"] or 5432,
        user=server["USER"] or "postgres",
        dbname="postgres",
        autocommit=True,
    )
    with psycopg.connect(**admin) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name, admin
    finally:
        with psycopg.connect(**admin) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _env(port: int, name: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GARDEN_DB_POOL_MAX"}
    env.update(DATABASE_URL=f"postgres://postgres@127.0.0.1:{port}/{name}", **extra)
    return env


def test_garden_connects_through_a_transaction_pooler_only_as_told_and_names_a_missing_timeout(
    database,
):
    name, admin = database
    with pgbouncer() as port:
        # Without the setting the idle timeout goes as a startup option, which PgBouncer
        # refuses: the reason is in the error, not a pool timeout.
        plain = manage(["showmigrations", "garden"], _env(port, name))
        assert plain.returncode != 0
        assert "unsupported startup parameter" in plain.stderr, plain.stderr[-2000:]

        pooled = _env(port, name, GARDEN_DB_TRANSACTION_POOLER="true")
        # Migrations run through it too (the index builds that run outside a transaction
        # included), and their checks name the timeout the server does not set.
        warned = manage(["migrate", "--no-input"], pooled)
        assert warned.returncode == 0, warned.stderr[-2000:]
        assert "garden.W009" in warned.stderr and "is off" in warned.stderr

    with psycopg.connect(**admin) as conn:
        conn.execute(f"ALTER DATABASE \"{name}\" SET idle_in_transaction_session_timeout = '20s'")
    with pgbouncer() as port:  # new server sessions take the database's setting
        pooled = _env(port, name, GARDEN_DB_TRANSACTION_POOLER="true")
        quiet = manage(["check", "--database", "default"], pooled)
        assert quiet.returncode == 0 and "garden.W009" not in quiet.stderr, quiet.stderr


def test_an_idle_transactions_lock_is_ended_by_the_server_behind_the_pooler(database):
    name, admin = database
    with psycopg.connect(**admin) as conn:
        conn.execute(f"ALTER DATABASE \"{name}\" SET idle_in_transaction_session_timeout = '1s'")
    with psycopg.connect(**{**admin, "dbname": name}) as conn:
        conn.execute("CREATE TABLE slot (id int PRIMARY KEY)")
        conn.execute("INSERT INTO slot VALUES (1)")
    with pgbouncer() as port:
        pooled = dict(
            host="127.0.0.1", port=port, user="postgres", dbname=name, prepare_threshold=None
        )
        frozen = psycopg.connect(**pooled)  # a process that stopped mid-transaction
        frozen.execute("SELECT id FROM slot WHERE id = 1 FOR UPDATE")
        took: list[float] = []

        def take() -> None:
            with psycopg.connect(**pooled, autocommit=True) as other:
                start = time.monotonic()
                other.execute("SET lock_timeout = '10s'")
                other.execute("UPDATE slot SET id = 1 WHERE id = 1")
                took.append(time.monotonic() - start)

        waiter = threading.Thread(target=take)
        waiter.start()
        waiter.join(15)
        assert took and took[0] < 8, took  # the server ended the idle session and its lock
        with pytest.raises(psycopg.Error, match="idle-in-transaction timeout"):
            frozen.execute("SELECT 1")  # it was ended, not committed
        frozen.close()


# The group loop (the 1:1 loop is the same loop, in an agent's own room) and the gardener's
# tend (whose survey reads with .iterator()).
THROUGH_THE_POOLER = (
    "tests/groups/test_loop_budget.py",
    "tests/operator_messages/test_gardener.py",
    # Beat's lease: single autocommit UPDATEs, no session state; a real beat behind the pooler
    # (the embedded one). Two beat processes take the same lease the same way, in the main run.
    "tests/garden/test_one_beat.py",
)
THROUGH_THE_POOLER_SKIPS = "not test_two_beats"


def test_the_loops_tend_and_beat_run_through_the_pooler(database):
    name, admin = database
    try:
        with pgbouncer() as port:
            env = _env(
                port,
                name,
                GARDEN_DB_TRANSACTION_POOLER="true",
                GARDEN_CACHE_PREFIX=f"pgb{os.getpid()}",
                GARDEN_VAR_DIR=tempfile.mkdtemp(prefix="garden-pgbouncer-"),
            )
            # --reuse-db: the pooler keeps server sessions to the test database, which the
            # fixture drops (FORCE) once the pooler is gone.
            ran = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    *THROUGH_THE_POOLER,
                    "-k",
                    THROUGH_THE_POOLER_SKIPS,
                    "-rA",
                    "-p",
                    "no:cacheprovider",
                    "--reuse-db",
                    "-x",
                ],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
    finally:
        with psycopg.connect(**admin) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "test_{name}" WITH (FORCE)')
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    said = ran.stdout.splitlines()
    assert len([line for line in said if line.startswith("PASSED ")]) >= 26, ran.stdout[-4000:]
    assert not [line for line in said if line.startswith(("FAILED ", "ERROR ", "SKIPPED "))]
