"""A message's client id is unique per sender, no longer per conversation.

Safe on existing rows: every set of rows unique on (tenant, conversation, client_id) is unique
on (tenant, conversation, author, client_id) too, so the new constraint holds before the old
one goes; it is added first, so there is no moment without one."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chatplatform', '0015_server_compaction'),
        ('chats', '0009_turn_record_superseded_at'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddConstraint(
            model_name='message',
            constraint=models.UniqueConstraint(
                condition=models.Q(('client_id__isnull', False)),
                fields=('tenant', 'conversation', 'author', 'client_id'),
                name='message_unique_author_client_id',
            ),
        ),
        migrations.RemoveConstraint(
            model_name='message',
            name='message_unique_client_id',
        ),
    ]
