"""The beat schedule of the tenants' retention (``chats.tasks.expire_conversations``, daily;
an admin's edit of it is kept)."""

from django.db import migrations
from django.utils import timezone

TASK = "chats.tasks.expire_conversations"
NAME = "chats: delete conversations past their tenant's retention"


def schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    interval, _ = IntervalSchedule.objects.get_or_create(every=1, period="days")
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={
            "task": TASK,
            "interval": interval,
            "args": "[]",
            "kwargs": "{}",
            "expire_seconds": 23 * 3600,
            "enabled": True,
            "description": "Deletes the conversations nobody has written in for their "
            "tenant's retention period (Tenant.retention_days), with their messages, images, "
            "summaries and vectors; the turns' cost figures stay. Idempotent.",
        },
    )
    PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def unschedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0011_conversation_records"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(schedule, unschedule)]
