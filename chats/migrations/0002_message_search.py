"""Full-text search over messages (chats.retrieval.search).

PostgreSQL: a STORED generated ``search_vector`` column ('simple' configuration over the
lower-cased, accent-folded content, Han/Kana/Hangul characters spaced apart so they index one
by one) and a GIN index leading with tenant and conversation when btree_gin is (or can be)
installed, else a GIN index on the vector alone (the (tenant, conversation, seq) unique index
then filters). Creating the extension is tried inside a savepoint, so a role without the right
to create it still migrates.

SQLite: a contentless FTS5 table ``chats_message_fts(scope, body)`` kept in sync by triggers;
``scope`` is ``t<tenant_id>c<conversation_id>``. Existing rows are indexed here.

The fold table is a copy of chats.retrieval.query.FOLD_FROM/FOLD_TO (a test checks that they
are equal): migrations must not import code that may change.
"""

from django.db import DatabaseError, migrations, transaction

FOLD_FROM = "àáâãäåāăąçćĉċčďđèéêëēĕėęěĝğġģĥħìíîïĩīĭįıĵķĺļľłñńņňòóôõöøōŏőŕŗřśŝşšţťùúûüũūŭůűųýÿŷźżžё"
FOLD_TO = "aaaaaaaaacccccddeeeeeeeeegggghhiiiiiiiiijkllllnnnnooooooooorrrssssttuuuuuuuuuuyyyzzzе"
CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"

PG_DOCUMENT = (
    "to_tsvector('simple'::regconfig, translate(regexp_replace(lower(content), "
    f"'([{CJK_CLASS}])', ' \\1 ', 'g'), '{FOLD_FROM}', '{FOLD_TO}'))"
)
PG_INDEX = "chats_message_search_idx"

SQLITE_FORWARD = [
    """
    CREATE VIRTUAL TABLE IF NOT EXISTS chats_message_fts USING fts5(
        scope, body, content='', tokenize='unicode61 remove_diacritics 2', prefix='2 3'
    )
    """,
    """
    CREATE TRIGGER IF NOT EXISTS chats_message_fts_ai AFTER INSERT ON chats_message BEGIN
        INSERT INTO chats_message_fts(rowid, scope, body)
        VALUES (new.id, 't' || new.tenant_id || 'c' || new.conversation_id, new.content);
    END
    """,
    """
    CREATE TRIGGER IF NOT EXISTS chats_message_fts_ad AFTER DELETE ON chats_message BEGIN
        INSERT INTO chats_message_fts(chats_message_fts, rowid, scope, body)
        VALUES ('delete', old.id, 't' || old.tenant_id || 'c' || old.conversation_id,
                old.content);
    END
    """,
    """
    CREATE TRIGGER IF NOT EXISTS chats_message_fts_au
    AFTER UPDATE OF content, tenant_id, conversation_id ON chats_message BEGIN
        INSERT INTO chats_message_fts(chats_message_fts, rowid, scope, body)
        VALUES ('delete', old.id, 't' || old.tenant_id || 'c' || old.conversation_id,
                old.content);
        INSERT INTO chats_message_fts(rowid, scope, body)
        VALUES (new.id, 't' || new.tenant_id || 'c' || new.conversation_id, new.content);
    END
    """,
    """
    INSERT INTO chats_message_fts(rowid, scope, body)
    SELECT id, 't' || tenant_id || 'c' || conversation_id, content FROM chats_message
    """,
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS chats_message_fts_au",
    "DROP TRIGGER IF EXISTS chats_message_fts_ad",
    "DROP TRIGGER IF EXISTS chats_message_fts_ai",
    "DROP TABLE IF EXISTS chats_message_fts",
]


def _btree_gin(schema_editor) -> bool:
    """Whether btree_gin is installed, installing it if this role may."""
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'btree_gin'")
        if cursor.fetchone():
            return True
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'btree_gin'")
        if not cursor.fetchone():
            return False
    try:
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    except DatabaseError:
        return False
    return True


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(
            "ALTER TABLE chats_message ADD COLUMN search_vector tsvector "
            f"GENERATED ALWAYS AS ({PG_DOCUMENT}) STORED"
        )
        columns = "tenant_id, conversation_id, search_vector"
        if not _btree_gin(schema_editor):
            columns = "search_vector"
        schema_editor.execute(f"CREATE INDEX {PG_INDEX} ON chats_message USING gin ({columns})")
    elif vendor == "sqlite":
        for sql in SQLITE_FORWARD:
            schema_editor.execute(sql)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {PG_INDEX}")
        schema_editor.execute("ALTER TABLE chats_message DROP COLUMN IF EXISTS search_vector")
    elif vendor == "sqlite":
        for sql in SQLITE_BACKWARD:
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
