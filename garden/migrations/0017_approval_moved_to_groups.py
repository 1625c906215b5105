"""Approval lives in groups now (groups 0007, same table ``garden_approval``): garden's state
forgets it, after every relation to it points at groups.Approval. Nothing in the database
changes, and no row moves."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("garden", "0016_mcp_servers"),
        ("groups", "0007_approval"),
        ("telegram_approvals", "0002_approval_in_groups"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="Approval")],
            database_operations=[],
        ),
    ]
