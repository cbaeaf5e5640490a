"""When each fact was true (existing facts: from when they were saved until replaced), and
memories ended because the message they came from was edited."""

from django.db import migrations, models


def fill_validity(apps, schema_editor):
    UserFact = apps.get_model("memory", "UserFact")
    UserFact.objects.filter(valid_from__isnull=True).update(valid_from=models.F("created_at"))
    UserFact.objects.filter(ended_reason="replaced", valid_until__isnull=True).update(
        valid_until=models.F("superseded_at")
    )


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0005_standing_instructions'),
    ]

    operations = [
        migrations.AddField(
            model_name='userfact',
            name='valid_from',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='userfact',
            name='valid_until',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='userfact',
            name='ended_reason',
            field=models.CharField(blank=True, choices=[('replaced', 'Replaced by a newer value'), ('evicted', 'Evicted (over the per-user limit)'), ('deleted', 'Deleted'), ('edited', 'Its message was edited')], max_length=8),
        ),
        migrations.RunPython(fill_validity, migrations.RunPython.noop),
    ]
