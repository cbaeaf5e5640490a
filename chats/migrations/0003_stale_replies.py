"""Stale replies: a partial index holding only replies being streamed, and the beat schedule
of ``chats.tasks.mark_stale_replies`` (every minute; an admin's edit of it is kept)."""

from django.db import migrations, models
from django.utils import timezone

TASK = "chats.tasks.mark_stale_replies"
NAME = "chats: finish stale replies"


def schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    interval, _ = IntervalSchedule.objects.get_or_create(every=1, period="minutes")
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={
            "task": TASK,
            "interval": interval,
            "args": "[]",
            "kwargs": "{}",
            "expire_seconds": 50,
            "enabled": True,
            "description": "Replies left streaming by a process that died become incomplete, "
            "with the text stored so far. Idempotent.",
        },
    )
    PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def unschedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0002_message_search"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("status", "streaming")),
                fields=["tenant", "updated_at"],
                name="message_streaming_idx",
            ),
        ),
        migrations.RunPython(schedule, unschedule),
    ]
