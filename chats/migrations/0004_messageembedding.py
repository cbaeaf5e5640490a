"""Message embeddings for dense retrieval, and the beat schedule of their backfill
(``chats.tasks.backfill_message_embeddings`` every 10 minutes; an admin's edit of it is kept).
"""

import django.db.models.deletion
from django.db import migrations, models
from django.utils import timezone

TASK = "chats.tasks.backfill_message_embeddings"
NAME = "chats: backfill message embeddings"


def schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    interval, _ = IntervalSchedule.objects.get_or_create(every=10, period="minutes")
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={
            "task": TASK,
            "interval": interval,
            "args": "[]",
            "kwargs": "{}",
            "expire_seconds": 9 * 60,
            "enabled": True,
            "description": "Embeds the messages of conversations whose policy uses retrieval "
            "by meaning that have no vector yet (bounded batches, idempotent). Does nothing "
            "where the embeddings requirements are not installed.",
        },
    )
    PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def unschedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('chatplatform', '0005_contextpolicy_retrieval_dense'),
        ('chats', '0003_stale_replies'),
        ('django_celery_beat', '0019_alter_periodictasks_options'),
    ]

    operations = [
        migrations.CreateModel(
            name='MessageEmbedding',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('seq', models.PositiveBigIntegerField()),
                ('model', models.CharField(max_length=64)),
                ('vector', models.BinaryField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chats.conversation')),
                ('message', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='embeddings', to='chats.message')),
                ('tenant', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chatplatform.tenant')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('tenant', 'conversation', 'model', 'seq'), name='embedding_unique_seq')],
            },
        ),
        migrations.RunPython(schedule, unschedule),
    ]
