"""Who said an owner turn: a nullable column with no database constraint (adding one would
scan the table under lock), and its index built concurrently, so appends go on throughout.
No backfill: a turn said before it has no author and reads as the room owner's."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from garden.concurrent_index import concurrent_index


class Migration(migrations.Migration):
    # CREATE INDEX CONCURRENTLY refuses to run inside a transaction.
    atomic = False

    dependencies = [
        ("garden", "0025_workspace_invitations"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="author",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RunPython(
            *concurrent_index(
                "message_author", "garden_message", "author_id", where="author_id IS NOT NULL"
            ),
            elidable=False,
        ),
    ]
