"""The Telegram message's approval is groups.Approval now (groups 0007). The column and its
foreign key to ``garden_approval`` are as they were, so only the state changes."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("groups", "0007_approval"),
        ("telegram_approvals", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="telegramapprovalmessage",
                    name="approval",
                    field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name="telegram_message", to="groups.approval"),
                ),
            ],
            database_operations=[],
        ),
    ]
