"""The conversation records become the platform's models (app label ``chatplatform``).

Their tables stay as they are (``db_table``: ``chats_conversation``...): this migration only
moves them in Django's state, from the chats app to this one, and renames their content types
so that admin log entries and permissions follow. Nothing in the database changes but the
content types' app label."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MODELS = (
    "conversation",
    "participant",
    "message",
    "messagerevision",
    "turnrecord",
    "messageembedding",
)


def _relabel(apps, schema_editor, old, new):
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    for model in MODELS:
        if ContentType.objects.using(db).filter(app_label=new, model=model).exists():
            continue
        ContentType.objects.using(db).filter(app_label=old, model=model).update(app_label=new)


def content_types_to_platform(apps, schema_editor):
    _relabel(apps, schema_editor, "chats", "chatplatform")


def content_types_to_chats(apps, schema_editor):
    _relabel(apps, schema_editor, "chatplatform", "chats")


class Migration(migrations.Migration):

    dependencies = [
        ('chatplatform', '0017_policy_oversized_message'),
        ('chats', '0010_message_client_id_per_author'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    state_operations = [
        migrations.CreateModel(
            name='Conversation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('title', models.CharField(blank=True, max_length=200)),
                ('is_group', models.BooleanField(default=False)),
                ('carry_over_summary', models.BooleanField(default=True, help_text="Carry the continued conversation's summary into the context.")),
                ('last_seq', models.PositiveBigIntegerField(default=0)),
                ('message_count', models.PositiveIntegerField(default=0)),
                ('history_tokens', models.PositiveBigIntegerField(default=0)),
                ('archived_at', models.DateTimeField(blank=True, null=True)),
                ('window_start_seq', models.PositiveBigIntegerField(blank=True, editable=False, null=True)),
                ('window_sent_at', models.DateTimeField(blank=True, editable=False, null=True)),
                ('window_recalled_ids', models.JSONField(blank=True, default=list, editable=False)),
                ('window_summary_ids', models.JSONField(blank=True, default=list, editable=False)),
                ('window_full_tokens', models.PositiveBigIntegerField(default=0, editable=False)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('continues', models.ForeignKey(blank=True, help_text='An earlier conversation of the same user whose latest summary is carried in.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='continued_by', to='chatplatform.conversation')),
                ('created_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('policy', models.ForeignKey(blank=True, help_text="Overrides the tenant's active policy for this conversation.", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='chatplatform.contextpolicy')),
                ('tenant', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chatplatform.tenant')),
            ],
            options={
                'db_table': 'chats_conversation',
            },
        ),
        migrations.CreateModel(
            name='Message',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('seq', models.PositiveBigIntegerField()),
                ('role', models.CharField(choices=[('user', 'User'), ('assistant', 'Assistant'), ('system', 'System'), ('tool', 'Tool')], max_length=16)),
                ('content', models.TextField()),
                ('status', models.CharField(choices=[('streaming', 'Streaming'), ('complete', 'Complete'), ('failed', 'Failed'), ('incomplete', 'Incomplete')], default='complete', max_length=16)),
                ('token_count', models.PositiveIntegerField(blank=True, null=True)),
                ('token_counter', models.CharField(blank=True, max_length=40)),
                ('client_id', models.CharField(blank=True, max_length=64, null=True)),
                ('error_code', models.CharField(blank=True, max_length=40)),
                ('error_message', models.TextField(blank=True)),
                ('attachment', models.FileField(blank=True, null=True, upload_to='attachments/%Y/%m/')),
                ('attachment_type', models.CharField(blank=True, max_length=40)),
                ('attachment_bytes', models.PositiveIntegerField(blank=True, null=True)),
                ('edited_at', models.DateTimeField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('answers', models.ForeignKey(blank=True, help_text='For assistant replies: the user message answered.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chatplatform.message')),
                ('author', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chatplatform.conversation')),
                ('reply_to', models.ForeignKey(blank=True, help_text='The message this one quotes (group chats).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='chatplatform.message')),
                ('tenant', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chatplatform.tenant')),
            ],
            options={
                'db_table': 'chats_message',
                'ordering': ['conversation_id', 'seq'],
            },
        ),
        migrations.CreateModel(
            name='MessageEmbedding',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('seq', models.PositiveBigIntegerField()),
                ('model', models.CharField(max_length=64)),
                ('vector', models.BinaryField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chatplatform.conversation')),
                ('message', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='embeddings', to='chatplatform.message')),
                ('tenant', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chatplatform.tenant')),
            ],
            options={
                'db_table': 'chats_messageembedding',
            },
        ),
        migrations.CreateModel(
            name='MessageRevision',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('reason', models.CharField(choices=[('edited', 'Edited by its author'), ('regenerated', 'Reply regenerated'), ('resent', 'Reply replaced after its message was edited')], max_length=16)),
                ('content', models.TextField(blank=True)),
                ('status', models.CharField(choices=[('streaming', 'Streaming'), ('complete', 'Complete'), ('failed', 'Failed'), ('incomplete', 'Incomplete')], max_length=16)),
                ('error_code', models.CharField(blank=True, max_length=40)),
                ('token_count', models.PositiveIntegerField(blank=True, null=True)),
                ('token_counter', models.CharField(blank=True, max_length=40)),
                ('turn', models.JSONField(blank=True, default=dict)),
                ('written_at', models.DateTimeField()),
                ('revised_at', models.DateTimeField(auto_now_add=True)),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chatplatform.conversation')),
                ('message', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='revisions', to='chatplatform.message')),
                ('revised_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('tenant', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chatplatform.tenant')),
            ],
            options={
                'db_table': 'chats_messagerevision',
                'ordering': ['message_id', 'revised_at'],
            },
        ),
        migrations.CreateModel(
            name='Participant',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('joined_at', models.DateTimeField(auto_now_add=True)),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chatplatform.conversation')),
                ('tenant', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chatplatform.tenant')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'db_table': 'chats_participant',
            },
        ),
        migrations.AddField(
            model_name='conversation',
            name='participants',
            field=models.ManyToManyField(related_name='conversations', through='chatplatform.Participant', to=settings.AUTH_USER_MODEL),
        ),
        migrations.CreateModel(
            name='TurnRecord',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('strategy', models.CharField(max_length=32)),
                ('counter', models.CharField(max_length=40)),
                ('budget_tokens', models.PositiveIntegerField()),
                ('sections', models.JSONField(default=dict)),
                ('included', models.JSONField(default=list)),
                ('excluded', models.JSONField(default=list)),
                ('prompt_tokens_estimated', models.PositiveIntegerField()),
                ('prompt_tokens_reported', models.PositiveIntegerField(blank=True, null=True)),
                ('completion_tokens', models.PositiveIntegerField(default=0)),
                ('cache_read_tokens', models.PositiveIntegerField(default=0)),
                ('cache_write_tokens', models.PositiveIntegerField(default=0)),
                ('hypothetical_tokens', models.PositiveBigIntegerField(default=0)),
                ('cost_usd', models.DecimalField(decimal_places=6, default=0, max_digits=12)),
                ('full_history_cost_usd', models.DecimalField(decimal_places=6, default=0, max_digits=12)),
                ('time_to_first_token_ms', models.PositiveIntegerField(blank=True, null=True)),
                ('duration_ms', models.PositiveIntegerField(blank=True, null=True)),
                ('provider_context', models.JSONField(blank=True, default=dict)),
                ('assembly_ms', models.FloatField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('superseded_at', models.DateTimeField(blank=True, null=True)),
                ('assistant_message', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='chatplatform.message')),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chatplatform.conversation')),
                ('model_profile', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='chatplatform.modelprofile')),
                ('policy', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='chatplatform.contextpolicy')),
                ('tenant', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chatplatform.tenant')),
                ('user_message', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chatplatform.message')),
            ],
            options={
                'db_table': 'chats_turnrecord',
            },
        ),
        migrations.AddIndex(
            model_name='message',
            index=models.Index(condition=models.Q(('token_count__isnull', True)), fields=['tenant', 'token_counter'], name='message_uncounted_idx'),
        ),
        migrations.AddIndex(
            model_name='message',
            index=models.Index(condition=models.Q(('status', 'streaming')), fields=['tenant', 'updated_at'], name='message_streaming_idx'),
        ),
        migrations.AddConstraint(
            model_name='message',
            constraint=models.UniqueConstraint(fields=('tenant', 'conversation', 'seq'), include=('token_count', 'role'), name='message_unique_seq'),
        ),
        migrations.AddConstraint(
            model_name='message',
            constraint=models.UniqueConstraint(condition=models.Q(('client_id__isnull', False)), fields=('tenant', 'conversation', 'author', 'client_id'), name='message_unique_author_client_id'),
        ),
        migrations.AddConstraint(
            model_name='message',
            constraint=models.UniqueConstraint(condition=models.Q(('answers__isnull', False)), fields=('tenant', 'answers'), name='message_one_reply_per_message'),
        ),
        migrations.AddConstraint(
            model_name='messageembedding',
            constraint=models.UniqueConstraint(fields=('tenant', 'conversation', 'model', 'seq'), name='embedding_unique_seq'),
        ),
        migrations.AddIndex(
            model_name='messagerevision',
            index=models.Index(fields=['tenant', 'message', 'revised_at'], name='revision_message_idx'),
        ),
        migrations.AddIndex(
            model_name='participant',
            index=models.Index(fields=['tenant', 'user'], name='participant_user_idx'),
        ),
        migrations.AddConstraint(
            model_name='participant',
            constraint=models.UniqueConstraint(fields=('tenant', 'conversation', 'user'), name='participant_unique'),
        ),
        migrations.AddIndex(
            model_name='conversation',
            index=models.Index(fields=['tenant', '-updated_at'], name='conversation_recent_idx'),
        ),
        migrations.AddIndex(
            model_name='turnrecord',
            index=models.Index(fields=['tenant', 'conversation', '-created_at'], name='turn_conv_idx'),
        ),
        migrations.AddIndex(
            model_name='turnrecord',
            index=models.Index(fields=['tenant', 'created_at'], name='turn_usage_idx'),
        ),
        migrations.AddConstraint(
            model_name='turnrecord',
            constraint=models.UniqueConstraint(condition=models.Q(('superseded_at__isnull', True)), fields=('tenant', 'user_message'), name='turn_unique_current_message'),
        ),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=state_operations),
        migrations.RunPython(content_types_to_platform, content_types_to_chats),
    ]
