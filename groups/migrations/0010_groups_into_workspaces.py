"""Every existing group goes into its owner's own workspace, where its owner finds it as
before. Batched, each batch its own transaction outside the schema change; a run stopped
halfway is taken up again, and a group already in a workspace is left where it is. An agent's
own room stays outside any workspace: its 1:1 conversations reach it."""

from django.db import migrations, transaction

BATCH = 500


def groups_into_workspaces(apps, schema_editor):
    Group = apps.get_model("groups", "Group")
    Workspace = apps.get_model("garden", "Workspace")
    db = schema_editor.connection.alias
    after = 0
    while True:
        with transaction.atomic(using=db):
            rows = list(
                Group.objects.using(db)
                .filter(pk__gt=after, kind="team", workspace__isnull=True)
                .order_by("pk")
                .values_list("pk", "owner_id")[:BATCH]
            )
            if not rows:
                return
            owners = {owner for _, owner in rows}
            personal = dict(
                Workspace.objects.using(db)
                .filter(personal_for_id__in=owners)
                .values_list("personal_for_id", "pk")
            )
            by_workspace: dict[int, list[int]] = {}
            for pk, owner in rows:
                if owner in personal:
                    by_workspace.setdefault(personal[owner], []).append(pk)
            for workspace, pks in by_workspace.items():
                Group.objects.using(db).filter(pk__in=pks, workspace__isnull=True).update(
                    workspace_id=workspace
                )
            after = rows[-1][0]


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("groups", "0009_group_workspace"),
        ("garden", "0024_personal_workspaces"),
    ]

    operations = [
        migrations.RunPython(groups_into_workspaces, migrations.RunPython.noop, elidable=False),
    ]
