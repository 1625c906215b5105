"""Rows as the database holds them, for the parity tests of the critical writes
(tests/*/test_statements.py): which form of a statement runs, and every concrete field of a
row or an instance."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.models import Model


@pytest.fixture(params=["orm", "pg"])
def path(request) -> str:
    """Which of a statement's two forms runs: both on PostgreSQL, the reference elsewhere."""
    if request.param == "pg" and connection.vendor != "postgresql":
        pytest.skip("the fast path is PostgreSQL's; this database runs the ORM reference")
    return request.param


def row(model: type[Model], pk: Any) -> dict[str, Any]:
    """Every concrete field of one row, as stored."""
    names = [f.attname for f in model._meta.concrete_fields]
    return model.objects.filter(pk=pk).values(*names).get()


def fields_of(instance: Model) -> dict[str, Any]:
    """Every concrete field of an instance, as it holds them."""
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}
