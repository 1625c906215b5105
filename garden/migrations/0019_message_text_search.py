"""The index behind search (groups/search.py): on PostgreSQL, a GIN index over the words of each
turn's text blocks, built CONCURRENTLY so appends go on while it is built; on SQLite nothing
(search there is a plain match over the rows).

Not in ``Message.Meta.indexes``: SQLite rebuilds a table's model indexes whenever a later
migration alters it, and this expression names PostgreSQL functions. Its expression is frozen
here and repeated by the search query; tests/groups/test_search.py runs EXPLAIN to prove the
query is answered from this index. No backfill: building the index reads every row."""

from django.db import migrations

INDEX = "message_text_search"
WORDS = (
    "to_tsvector('simple'::regconfig, "
    'jsonb_path_query_array("content", \'$[*] ? (@.type == "text").text\'))'
)


def create_index(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        # A build that failed part-way leaves an invalid index under the name: drop it, so a
        # second migrate builds it again instead of skipping it.
        cursor.execute(
            "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = %s AND NOT i.indisvalid",
            [INDEX],
        )
        if cursor.fetchone():
            cursor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{INDEX}"')
        cursor.execute(
            f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{INDEX}" ON "garden_message" '
            f"USING gin ({WORDS})"
        )


def drop_index(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{INDEX}"')


class Migration(migrations.Migration):
    # CREATE INDEX CONCURRENTLY refuses to run inside a transaction.
    atomic = False

    dependencies = [
        ("garden", "0018_page_visits"),
    ]

    operations = [
        migrations.RunPython(create_index, drop_index, elidable=False),
    ]
