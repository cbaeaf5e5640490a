"""Full-text search over summaries (chats.retrieval.search.search_summaries).

The same index design as chats.0002_message_search, over ``summaries_summary.text``:

* PostgreSQL: a STORED generated ``search_vector`` column ('simple' configuration over the
  lower-cased, accent-folded text, Han/Kana/Hangul characters spaced apart) and a GIN index
  leading with tenant and conversation when btree_gin is installed (chats.0002 installs it
  when the role may), else on the vector alone.
* SQLite: a contentless FTS5 table ``summaries_summary_fts(scope, body)`` kept in sync by
  triggers; ``scope`` is ``t<tenant_id>c<conversation_id>``. Existing rows are indexed here.

The fold table is a copy of chats.retrieval.query.FOLD_FROM/FOLD_TO (a test checks that they
are equal): migrations must not import code that may change.
"""

from django.db import migrations

FOLD_FROM = "àáâãäåāăąçćĉċčďđèéêëēĕėęěĝğġģĥħìíîïĩīĭįıĵķĺļľłñńņňòóôõöøōŏőŕŗřśŝşšţťùúûüũūŭůűųýÿŷźżžё"
FOLD_TO = "aaaaaaaaacccccddeeeeeeeeegggghhiiiiiiiiijkllllnnnnooooooooorrrssssttuuuuuuuuuuyyyzzzе"
CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"

PG_DOCUMENT = (
    "to_tsvector('simple'::regconfig, translate(regexp_replace(lower(text), "
    f"'([{CJK_CLASS}])', ' \\1 ', 'g'), '{FOLD_FROM}', '{FOLD_TO}'))"
)
PG_INDEX = "summaries_summary_search_idx"
SCOPE_NEW = "'t' || new.tenant_id || 'c' || new.conversation_id"
SCOPE_OLD = "'t' || old.tenant_id || 'c' || old.conversation_id"

SQLITE_FORWARD = [
    """
    CREATE VIRTUAL TABLE IF NOT EXISTS summaries_summary_fts USING fts5(
        scope, body, content='', tokenize='unicode61 remove_diacritics 2', prefix='2 3'
    )
    """,
    f"""
    CREATE TRIGGER IF NOT EXISTS summaries_summary_fts_ai AFTER INSERT ON summaries_summary
    BEGIN
        INSERT INTO summaries_summary_fts(rowid, scope, body)
        VALUES (new.id, {SCOPE_NEW}, new.text);
    END
    """,
    f"""
    CREATE TRIGGER IF NOT EXISTS summaries_summary_fts_ad AFTER DELETE ON summaries_summary
    BEGIN
        INSERT INTO summaries_summary_fts(summaries_summary_fts, rowid, scope, body)
        VALUES ('delete', old.id, {SCOPE_OLD}, old.text);
    END
    """,
    f"""
    CREATE TRIGGER IF NOT EXISTS summaries_summary_fts_au
    AFTER UPDATE OF text, tenant_id, conversation_id ON summaries_summary BEGIN
        INSERT INTO summaries_summary_fts(summaries_summary_fts, rowid, scope, body)
        VALUES ('delete', old.id, {SCOPE_OLD}, old.text);
        INSERT INTO summaries_summary_fts(rowid, scope, body)
        VALUES (new.id, {SCOPE_NEW}, new.text);
    END
    """,
    """
    INSERT INTO summaries_summary_fts(rowid, scope, body)
    SELECT id, 't' || tenant_id || 'c' || conversation_id, text FROM summaries_summary
    """,
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS summaries_summary_fts_au",
    "DROP TRIGGER IF EXISTS summaries_summary_fts_ad",
    "DROP TRIGGER IF EXISTS summaries_summary_fts_ai",
    "DROP TABLE IF EXISTS summaries_summary_fts",
]


def _has_btree_gin(schema_editor) -> bool:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'btree_gin'")
        return cursor.fetchone() is not None


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(
            "ALTER TABLE summaries_summary ADD COLUMN search_vector tsvector "
            f"GENERATED ALWAYS AS ({PG_DOCUMENT}) STORED"
        )
        columns = "tenant_id, conversation_id, search_vector"
        if not _has_btree_gin(schema_editor):
            columns = "search_vector"
        schema_editor.execute(f"CREATE INDEX {PG_INDEX} ON summaries_summary USING gin ({columns})")
    elif vendor == "sqlite":
        for sql in SQLITE_FORWARD:
            schema_editor.execute(sql)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {PG_INDEX}")
        schema_editor.execute("ALTER TABLE summaries_summary DROP COLUMN IF EXISTS search_vector")
    elif vendor == "sqlite":
        for sql in SQLITE_BACKWARD:
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [
        ("summaries", "0003_beat_schedules"),
        ("chats", "0002_message_search"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
