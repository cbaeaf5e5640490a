"""Memories of kinds: a fact, a standing instruction or a preference."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0004_conversation_records'),
    ]

    operations = [
        migrations.AddField(
            model_name='userfact',
            name='kind',
            field=models.CharField(choices=[('fact', 'Fact'), ('instruction', 'Instruction'), ('preference', 'Preference')], default='fact', max_length=16),
        ),
    ]
