"""Rolling summaries follow the conversation's sessions: the pause that ends one
(``summary_session_gap_minutes``, default three hours)."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chatplatform', '0023_reply_excerpts'),
    ]

    operations = [
        migrations.AddField(
            model_name='contextpolicy',
            name='summary_session_gap_minutes',
            field=models.PositiveIntegerField(default=180, help_text='A pause longer than this many minutes ends a session of the conversation: a summary never spans one, so each covers part of a single session, and merged summaries take whole sessions where they can. Shorter splits summaries at shorter breaks.', validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(43200)]),
        ),
    ]
