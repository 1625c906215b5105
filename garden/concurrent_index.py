"""An index a migration builds without blocking writes: ``CREATE INDEX CONCURRENTLY`` on
PostgreSQL (a build that failed part-way, left invalid under the name, is dropped and built
again), an ordinary one on SQLite. For a migration with ``atomic = False``:

    migrations.RunPython(*concurrent_index("group_workspace", "groups_group", "workspace_id"))

Kept out of the models' ``Meta.indexes``, so the schema state does not know them and SQLite's
table rebuilds do not drop them; each is named here and in the migration that makes it."""

from __future__ import annotations

from collections.abc import Callable


def concurrent_index(
    name: str, table: str, columns: str, *, where: str = ""
) -> tuple[Callable, Callable]:
    """The forward and backward functions of a RunPython that builds and drops ``name``."""
    condition = f" WHERE {where}" if where else ""

    def create(apps, schema_editor) -> None:
        connection = schema_editor.connection
        with connection.cursor() as cursor:
            if connection.vendor != "postgresql":
                cursor.execute(
                    f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ({columns}){condition}'
                )
                return
            cursor.execute(
                "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = %s AND NOT i.indisvalid",
                [name],
            )
            if cursor.fetchone():
                cursor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
            cursor.execute(
                f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON "{table}" '
                f"({columns}){condition}"
            )

    def drop(apps, schema_editor) -> None:
        concurrently = " CONCURRENTLY" if schema_editor.connection.vendor == "postgresql" else ""
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(f'DROP INDEX{concurrently} IF EXISTS "{name}"')

    return create, drop
