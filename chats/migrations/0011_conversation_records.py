"""The conversation records left this app for the platform (``chatplatform`` 0018): removed
from the chats app's state only; their tables stay."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0010_message_client_id_per_author'),
        ('memory', '0004_conversation_records'),
        ('summaries', '0006_conversation_records'),
    ]

    state_operations = [
        migrations.RemoveField(
            model_name='messageembedding',
            name='conversation',
        ),
        migrations.RemoveField(
            model_name='message',
            name='conversation',
        ),
        migrations.RemoveField(
            model_name='messagerevision',
            name='conversation',
        ),
        migrations.RemoveField(
            model_name='participant',
            name='conversation',
        ),
        migrations.RemoveField(
            model_name='turnrecord',
            name='conversation',
        ),
        migrations.RemoveField(
            model_name='message',
            name='answers',
        ),
        migrations.RemoveField(
            model_name='message',
            name='author',
        ),
        migrations.RemoveField(
            model_name='message',
            name='reply_to',
        ),
        migrations.RemoveField(
            model_name='message',
            name='tenant',
        ),
        migrations.RemoveField(
            model_name='turnrecord',
            name='user_message',
        ),
        migrations.RemoveField(
            model_name='turnrecord',
            name='assistant_message',
        ),
        migrations.RemoveField(
            model_name='messagerevision',
            name='message',
        ),
        migrations.RemoveField(
            model_name='messageembedding',
            name='message',
        ),
        migrations.RemoveField(
            model_name='messageembedding',
            name='tenant',
        ),
        migrations.RemoveField(
            model_name='messagerevision',
            name='revised_by',
        ),
        migrations.RemoveField(
            model_name='messagerevision',
            name='tenant',
        ),
        migrations.RemoveField(
            model_name='participant',
            name='tenant',
        ),
        migrations.RemoveField(
            model_name='participant',
            name='user',
        ),
        migrations.RemoveField(
            model_name='turnrecord',
            name='model_profile',
        ),
        migrations.RemoveField(
            model_name='turnrecord',
            name='policy',
        ),
        migrations.RemoveField(
            model_name='turnrecord',
            name='tenant',
        ),
        migrations.DeleteModel(
            name='Conversation',
        ),
        migrations.DeleteModel(
            name='Message',
        ),
        migrations.DeleteModel(
            name='MessageEmbedding',
        ),
        migrations.DeleteModel(
            name='MessageRevision',
        ),
        migrations.DeleteModel(
            name='Participant',
        ),
        migrations.DeleteModel(
            name='TurnRecord',
        ),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=state_operations),
    ]
