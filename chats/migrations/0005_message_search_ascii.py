"""The message search document skips the accent folding and Han/Kana/Hangul spacing for
text that is all ASCII (PostgreSQL only).

Both steps change nothing in ASCII text (every character they rewrite is outside ASCII), so
the vector is the same for every row. They are what the column cost: ``translate`` with a
multibyte table walks the table for every character, about 0.14 ms for a 500-character
reply, written twice per turn (the reply's insert and its final text). The ASCII test is one
regular-expression scan.

A generated column's expression cannot be altered in place before PostgreSQL 17, so the
column and its GIN index are dropped and added again: the table is rewritten under an
exclusive lock, which on a large table takes a maintenance window.
"""

import importlib

from django.db import migrations

search = importlib.import_module("chats.migrations.0002_message_search")

FOLDED = (
    f"translate(regexp_replace(lower(content), '([{search.CJK_CLASS}])', ' \\1 ', 'g'), "
    f"'{search.FOLD_FROM}', '{search.FOLD_TO}')"
)
PG_DOCUMENT = (
    "to_tsvector('simple'::regconfig, CASE WHEN content ~ '[^[:ascii:]]' "
    f"THEN {FOLDED} ELSE lower(content) END)"
)


def _recreate(schema_editor, document: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return  # SQLite indexes with FTS5 triggers (migration 0002), unchanged
    schema_editor.execute(f"DROP INDEX IF EXISTS {search.PG_INDEX}")
    schema_editor.execute("ALTER TABLE chats_message DROP COLUMN IF EXISTS search_vector")
    schema_editor.execute(
        "ALTER TABLE chats_message ADD COLUMN search_vector tsvector "
        f"GENERATED ALWAYS AS ({document}) STORED"
    )
    columns = "tenant_id, conversation_id, search_vector"
    if not search._btree_gin(schema_editor):
        columns = "search_vector"
    schema_editor.execute(f"CREATE INDEX {search.PG_INDEX} ON chats_message USING gin ({columns})")


def forwards(apps, schema_editor):
    _recreate(schema_editor, PG_DOCUMENT)


def backwards(apps, schema_editor):
    _recreate(schema_editor, search.PG_DOCUMENT)


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0004_messageembedding"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
