"""A fact's source message under its new app label (state only: the column and its foreign
key stay)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chatplatform', '0018_conversation_records'),
        ('memory', '0003_userfact_shareable'),
    ]

    state_operations = [
        migrations.AlterField(
            model_name='userfact',
            name='source_message',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='chatplatform.message'),
        ),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=state_operations),
    ]
