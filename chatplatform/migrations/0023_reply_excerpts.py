"""Recalled replies may go as their head: the policy's ``reply_excerpt_tokens`` (default
100) and the cached window's record of which of its recalled messages it shows so."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chatplatform', '0022_message_vector_index'),
    ]

    operations = [
        migrations.AddField(
            model_name='contextpolicy',
            name='reply_excerpt_tokens',
            field=models.PositiveIntegerField(default=100, help_text='Hybrid: an assistant reply recalled only because the message it answers was found goes as its first this many tokens, so the room holds more of the conversation; a reply found by its own words goes whole. 0: replies always go whole.', validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(4000)]),
        ),
        migrations.AddField(
            model_name='conversation',
            name='window_excerpt_ids',
            field=models.JSONField(blank=True, default=list, editable=False),
        ),
    ]
