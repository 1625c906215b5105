"""Every person gets their own workspace, with themselves as its admin: what they have today
stays theirs in it. Batched, each batch its own transaction outside the schema change, so a
large site migrates without one long lock, and a run stopped halfway is taken up again."""

from django.apps import apps as current_apps
from django.conf import settings
from django.db import migrations, transaction

BATCH = 500


def personal_workspaces(apps, schema_editor):
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    Workspace = apps.get_model("garden", "Workspace")
    WorkspaceMember = apps.get_model("garden", "WorkspaceMember")
    db = schema_editor.connection.alias
    # Historical models carry no methods: the name field is read off the current user model.
    username = getattr(current_apps.get_model(settings.AUTH_USER_MODEL), "USERNAME_FIELD", "pk")
    after = 0
    while True:
        with transaction.atomic(using=db):
            users = list(
                User.objects.using(db)
                .filter(pk__gt=after, personal_workspace__isnull=True)
                .order_by("pk")[:BATCH]
            )
            if not users:
                return
            made = Workspace.objects.using(db).bulk_create(
                [
                    Workspace(
                        name=f"{getattr(user, username)}'s workspace"[:100],
                        kind="personal",
                        personal_for_id=user.pk,
                    )
                    for user in users
                ]
            )
            if not all(workspace.pk for workspace in made):  # a backend without RETURNING
                made = Workspace.objects.using(db).filter(
                    personal_for_id__in=[user.pk for user in users]
                )
            WorkspaceMember.objects.using(db).bulk_create(
                [
                    WorkspaceMember(workspace_id=w.pk, user_id=w.personal_for_id, role="admin")
                    for w in made
                ]
            )
            after = users[-1].pk


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("garden", "0023_workspaces"),
    ]

    operations = [
        migrations.RunPython(personal_workspaces, migrations.RunPython.noop, elidable=False),
    ]
