"""Summaries point at the conversation records under their new app label (state only: the
columns and their foreign keys stay)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chatplatform', '0018_conversation_records'),
        ('summaries', '0005_compaction_kind'),
    ]

    state_operations = [
        migrations.AlterField(
            model_name='summary',
            name='conversation',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chatplatform.conversation'),
        ),
        migrations.AlterField(
            model_name='summary',
            name='first_message',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='chatplatform.message'),
        ),
        migrations.AlterField(
            model_name='summary',
            name='last_message',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='chatplatform.message'),
        ),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=state_operations),
    ]
