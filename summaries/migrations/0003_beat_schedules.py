"""Beat schedules of the summaries jobs, in django-celery-beat's tables (editable in the admin).

- ``summaries: refresh periodic summaries``: hourly check; each active conversation's 7-day
  and 30-day summaries are rebuilt when its policy's interval (3 / 14 days) has passed.
- ``summaries: backfill token counts``: every 5 minutes; counts legacy messages and recounts
  those counted by another counter than their policy's model now uses.

Existing rows (changed by an admin) are left as they are.
"""

from django.db import migrations
from django.utils import timezone

SCHEDULES = [
    # name, task, every, period, expire seconds, description
    (
        "summaries: refresh periodic summaries",
        "summaries.tasks.refresh_periodic_summaries",
        1,
        "hours",
        50 * 60,
        "Fans out per active conversation; each refreshes its 7-day / 30-day summaries at its "
        "policy's interval. Idempotent; duplicate runs within the dedupe window are no-ops.",
    ),
    (
        "summaries: backfill token counts",
        "summaries.tasks.backfill_token_counts",
        5,
        "minutes",
        4 * 60,
        "Counts legacy messages (token_count NULL) and recounts messages counted by another "
        "counter than their policy's model uses; batched, resumable, idempotent.",
    ),
]


def forwards(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    for name, task, every, period, expire_seconds, description in SCHEDULES:
        interval, _ = IntervalSchedule.objects.get_or_create(every=every, period=period)
        PeriodicTask.objects.get_or_create(
            name=name,
            defaults={
                "task": task,
                "interval": interval,
                "args": "[]",
                "kwargs": "{}",
                "expire_seconds": expire_seconds,
                "enabled": True,
                "description": description,
            },
        )
    # Tell running beats that the schedule changed (signals do not fire in migrations).
    PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def backwards(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name__in=[s[0] for s in SCHEDULES]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("summaries", "0002_tokenbackfillstate"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(forwards, backwards)]
