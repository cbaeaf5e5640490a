"""SQLite: an index on messages by ``(tenant, conversation, seq)``.

On PostgreSQL the unique constraint ``message_unique_seq`` is that index (covering token
counts and roles). SQLite has no covering indexes, so Django creates nothing for that
constraint there, and every read of a conversation's messages by seq (the history walk, the
retriever's rows and neighbours) scanned the whole conversation through the conversation
index: at 100,000 messages the history took ~55 ms and each retrieval fetch ~25 ms. A later
migration that rebuilds ``chats_message`` on SQLite drops this index: a test checks it is
there after all migrations.
"""

from django.db import migrations

INDEX = "message_seq_sqlite_idx"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {INDEX} ON chats_message (tenant_id, conversation_id, seq)"
        )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [
        ("chatplatform", "0024_summary_session_gap"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
