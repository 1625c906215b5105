"""The beat entry "gardener: tend": operator_messages.tend every fifteen minutes."""

from django.db import migrations
from django.utils import timezone

TASK_NAME = "gardener: tend"


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_15_minutes, _ = IntervalSchedule.objects.get_or_create(every=15, period="minutes")
    PeriodicTask.objects.update_or_create(
        name=TASK_NAME,
        defaults={"task": "operator_messages.tend", "interval": every_15_minutes,
                  "enabled": True, "description": "The gardener surveys the garden."},
    )
    _tell_beat(apps)


def _tell_beat(apps):
    # Historical models skip PeriodicTask.save(), which is what tells a running beat to reload.
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=TASK_NAME).delete()
    _tell_beat(apps)


class Migration(migrations.Migration):

    dependencies = [
        ("operator_messages", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
