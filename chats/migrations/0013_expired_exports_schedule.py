"""The beat schedule that removes exports whose download link expired
(``chats.tasks.remove_expired_exports``, hourly; an admin's edit of it is kept)."""

from django.db import migrations
from django.utils import timezone

TASK = "chats.tasks.remove_expired_exports"
NAME = "chats: remove exports whose download link expired"


def schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    interval, _ = IntervalSchedule.objects.get_or_create(every=1, period="hours")
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={
            "task": TASK,
            "interval": interval,
            "args": "[]",
            "kwargs": "{}",
            "expire_seconds": 3000,
            "enabled": True,
            "description": "Removes the files of conversation exports whose download link "
            "expired (TRANSFER_LINK_HOURS), in every tenant. Idempotent.",
        },
    )
    PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def unschedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0012_retention_schedule"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(schedule, unschedule)]
