"""An approval keeps the group it was asked in, so a clear that detaches it from its thread
and request no longer hides it from the group's removal for good. Approvals with a request or
a thread learn their group here; ones detached before this cannot be traced to one."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def backfill(apps, schema_editor):
    Approval = apps.get_model("garden", "Approval")
    GroupRequest = apps.get_model("groups", "GroupRequest")
    Conversation = apps.get_model("garden", "Conversation")
    Approval.objects.filter(request__isnull=False).update(
        group_id=Subquery(
            GroupRequest.objects.filter(pk=OuterRef("request_id")).values("group_id")[:1]
        )
    )
    Approval.objects.filter(group__isnull=True, conversation__group__isnull=False).update(
        group_id=Subquery(
            Conversation.objects.filter(pk=OuterRef("conversation_id")).values("group_id")[:1]
        )
    )


class Migration(migrations.Migration):
    dependencies = [
        ("garden", "0013_approval_approved_arguments"),
        ("groups", "0005_solo_rooms"),
    ]

    operations = [
        migrations.AddField(
            model_name="approval",
            name="group",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="approvals",
                to="groups.group",
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
