"""The workspace a group belongs to: nullable, its index built concurrently (groups 0010 fills
it, in batches outside this schema change)."""

import django.db.models.deletion
from django.db import migrations, models

from garden.concurrent_index import concurrent_index


class Migration(migrations.Migration):
    # CREATE INDEX CONCURRENTLY refuses to run inside a transaction.
    atomic = False

    dependencies = [
        ("garden", "0026_message_author"),
        ("groups", "0008_approval_next_try_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="group",
            name="workspace",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="groups",
                to="garden.workspace",
            ),
        ),
        migrations.RunPython(
            *concurrent_index("group_workspace", "groups_group", "workspace_id"),
            elidable=False,
        ),
    ]
