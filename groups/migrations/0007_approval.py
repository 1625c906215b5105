"""Approval moves from garden to groups: its table stays ``garden_approval`` and its rows stay
where they are; only the migration state learns the model's new app (state-only, so nothing
in the database changes). garden's state drops its copy in garden 0017, once the Telegram
message's relation points here (telegram_approvals 0002)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("garden", "0016_mcp_servers"),
        ("groups", "0006_cost_and_webhooks"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Approval",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("tool_call_id", models.CharField(max_length=100)),
                        ("action", models.JSONField(help_text="The exact tool call: {name, arguments}.")),
                        ("approved_arguments", models.JSONField(blank=True, help_text="The arguments the person approved it with, when they changed the requested ones (the action that runs); null when it runs as requested.", null=True)),
                        ("status", models.CharField(choices=[("pending", "Pending"), ("approved", "Approved"), ("rejected", "Rejected")], default="pending", max_length=10)),
                        ("surface", models.CharField(blank=True, max_length=20)),
                        ("reason", models.CharField(blank=True, max_length=200)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("decided_at", models.DateTimeField(blank=True, null=True)),
                        ("executed_at", models.DateTimeField(blank=True, null=True)),
                        ("agent", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="approvals", to="garden.agent")),
                        ("conversation", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="approvals", to="garden.conversation")),
                        ("decided_by", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to=settings.AUTH_USER_MODEL)),
                        ("group", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name="approvals", to="groups.group")),
                        ("owner", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="approvals", to=settings.AUTH_USER_MODEL)),
                        ("request", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="approvals", to="groups.grouprequest")),
                    ],
                    options={
                        "db_table": "garden_approval",
                        "ordering": ["id"],
                        "constraints": [models.UniqueConstraint(fields=("conversation", "tool_call_id"), name="approval_one_per_tool_call")],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
