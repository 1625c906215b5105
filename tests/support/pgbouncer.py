"""A real PgBouncer in transaction mode (Debian's package) in front of the test machine's
PostgreSQL, on a free loopback port, for the tests of garden behind a transaction pooler
(bench/fault_pooler.py starts it; the fault harness's ``--pgbouncer`` runs through the same)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection

from bench.fault_pooler import PgBouncerFailed, PgBouncerMissing, pgbouncer_server


@contextmanager
def pgbouncer(*, idle_transaction_timeout: int = 0) -> Iterator[int]:
    """PgBouncer's port: every database of this test run's PostgreSQL server, pooled per
    transaction as a managed pooler does (no startup parameters, no session state)."""
    server = connection.settings_dict
    try:
        with pgbouncer_server(
            host=server["HOST"] or "127.0.0.1",
            port=int(server["PORT"] or 5432),
            user=server["USER"] or "postgres",
            idle_transaction_timeout=idle_transaction_timeout,
        ) as port:
            yield port
    except PgBouncerMissing as missing:
        if os.environ.get("GARDEN_REQUIRE_SERVICES") == "1":
            pytest.fail(str(missing))
        pytest.skip(str(missing))
    except PgBouncerFailed as failed:
        pytest.fail(str(failed))
