"""A turn that Stop cut short keeps what was streamed until then, marked by when it stopped.
Nullable: the previous release writes turns without it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("garden", "0019_message_text_search"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="stopped_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When Stop cut this turn short: it holds what was streamed until then.",
                null=True,
            ),
        ),
    ]
