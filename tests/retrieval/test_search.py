"""Full-text search over one conversation, on whichever backend the suite runs (SQLite FTS5 or
PostgreSQL tsvector): relevance, scoping, bounds, hostile input, index maintenance."""

from __future__ import annotations

import pytest
from django.db import connection

from chatplatform.db import server_side_binding
from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.retrieval import build_query, search_messages
from chats.services import conversation_create
from chats.services.messages import message_finish

from .conftest import add

pytestmark = pytest.mark.django_db

FILLER = [
    "Good morning, how are you today?",
    "I am fine, thanks for asking.",
    "The weather is nice in Lisbon this week.",
    "We should grab coffee sometime soon.",
]


def search(conversation, text, limit=10, before_seq=None, size=None):
    return search_messages(
        tenant_id=conversation.tenant_id,
        conversation_id=conversation.pk,
        query=build_query(text),
        limit=limit,
        before_seq=before_seq,
        conversation_size=size,
    )


def test_finds_the_relevant_message_first(conversation, member_a):
    add(conversation, member_a, *FILLER)
    (target,) = add(conversation, member_a, "Last year I painted a sunrise over the lake.")
    add(conversation, member_a, *FILLER)
    hits = search(conversation, "When did you paint the sunrise?")
    assert hits[0].message_id == target.pk
    assert hits[0].seq == target.seq
    assert hits[0].score > 0
    assert all(h.score <= hits[0].score for h in hits)


def test_rarer_terms_weigh_more(conversation, member_a):
    add(conversation, member_a, *[f"We talked about the dog again ({i})." for i in range(8)])
    (rare,) = add(conversation, member_a, "The dog chased a pelican on the beach.")
    hits = search(conversation, "dog pelican")
    assert hits[0].message_id == rare.pk


def test_prefix_and_accent_folding(conversation, member_a):
    (cafe,) = add(conversation, member_a, "Rendez-vous au Café de Flore à Paris.")
    (run,) = add(conversation, member_a, "She was running marathons every spring.")
    assert [h.message_id for h in search(conversation, "cafe")] == [cafe.pk]
    assert [h.message_id for h in search(conversation, "runs")] == [run.pk]


def test_cyrillic_and_cjk(conversation, member_a):
    add(conversation, member_a, *FILLER)
    (ru,) = add(conversation, member_a, "Вчера я ходила в группу поддержки.")
    (zh,) = add(conversation, member_a, "我昨天买了很多苹果和香蕉。")
    (ko,) = add(conversation, member_a, "주말에 학교에서 친구를 만났어요.")
    assert search(conversation, "Когда она ходила в группу поддержки?")[0].message_id == ru.pk
    assert search(conversation, "你喜欢苹果吗")[0].message_id == zh.pk
    assert search(conversation, "학교는 어디예요?")[0].message_id == ko.pk


def test_scoped_to_tenant_and_conversation(conversation, member_a, tenant_b, member_b):
    (mine,) = add(conversation, member_a, "The pelican flew over the harbour.")
    other_conversation = conversation_create(tenant=conversation.tenant, created_by=member_a)
    add(other_conversation, member_a, "pelican pelican pelican harbour harbour pelican")
    foreign = conversation_create(tenant=tenant_b, created_by=member_b)
    add(foreign, member_b, *["pelican harbour pelican harbour pelican"] * 5)
    hits = search(conversation, "pelican harbour", limit=100)
    assert [h.message_id for h in hits] == [mine.pk]
    # The other tenant's conversation id with our tenant id finds nothing, and vice versa.
    assert not search_messages(
        tenant_id=conversation.tenant_id,
        conversation_id=foreign.pk,
        query=build_query("pelican"),
        limit=10,
    )
    assert not search_messages(
        tenant_id=tenant_b.pk,
        conversation_id=conversation.pk,
        query=build_query("pelican"),
        limit=10,
    )


def test_before_seq_and_limit(conversation, member_a):
    messages = add(conversation, member_a, *[f"note {i} about the garden" for i in range(12)])
    hits = search(conversation, "garden", limit=5)
    assert len(hits) == 5
    before = messages[6].seq
    hits = search(conversation, "garden", limit=100, before_seq=before)
    assert len(hits) == 6
    assert all(h.seq < before for h in hits)
    assert search(conversation, "garden", limit=0) == []


HOSTILE = [
    "",
    "   ",
    "the and of to",
    "?!?!...",
    "'\"",
    "a:b c:* d & e | f ! (g) <-> h",
    "body : pelican",
    "scope:t1c1 OR pelican",
    'NEAR(pelican harbour) AND NOT "x" ^pelican -harbour +x',
    "pelican\x00harbour",
    "'; DROP TABLE chats_message; --",
    "\\' \\\" %s %(x)s {0} $1 ?",
    "我",
    "😀🎉 ✨",
    "x" * 5000,
    " ".join(f"word{i}" for i in range(300)),
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_or_empty_queries_never_fail(conversation, member_a, text):
    (pelican,) = add(conversation, member_a, "The pelican flew over the harbour.")
    hits = search(conversation, text)
    assert all(h.message_id == pelican.pk for h in hits)


def test_one_query_per_search_none_for_empty(conversation, member_a, django_assert_num_queries):
    # A caller that knows the conversation is short (the retriever passes its size) skips
    # the sample of the newest messages a long one takes on PostgreSQL.
    add(conversation, member_a, *FILLER)
    with django_assert_num_queries(1):
        search(conversation, "coffee weather Lisbon", limit=50, size=len(FILLER))
    with django_assert_num_queries(1):
        search(conversation, "苹果 coffee", limit=50, size=len(FILLER))
    with django_assert_num_queries(0):
        search(conversation, "the and of")
    with django_assert_num_queries(2 if connection.vendor == "postgresql" else 1):
        search(conversation, "coffee weather Lisbon", limit=50)


def test_index_follows_edits_and_deletes(conversation, member_a):
    (message,) = add(conversation, member_a, "Original text about tulips.")
    assert [h.message_id for h in search(conversation, "tulips")] == [message.pk]
    message_finish(message=message, content="Rewritten text about orchids.", status="complete")
    assert search(conversation, "tulips") == []
    assert [h.message_id for h in search(conversation, "orchids")] == [message.pk]
    with tenant_scope(conversation.tenant_id):
        Message.objects.filter(pk=message.pk).delete()
    assert search(conversation, "orchids") == []


@pytest.mark.postgres
def test_postgres_index_leads_with_tenant_when_btree_gin_is_available(db):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'chats_message_search_idx'"
        )
        (definition,) = cursor.fetchone()
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'btree_gin'")
        has_btree_gin = cursor.fetchone() is not None
    assert "gin" in definition.lower()
    if has_btree_gin:
        assert "(tenant_id, conversation_id, search_vector)" in definition


def test_sqlite_index_triggers_survive_all_migrations(db):
    """A later migration that rebuilds chats_message on SQLite (Django's table remake) drops
    its triggers and the index silently goes stale: this catches it."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'chats_message'"
        )
        names = {row[0] for row in cursor.fetchall()}
    assert {"chats_message_fts_ai", "chats_message_fts_ad", "chats_message_fts_au"} <= names


@pytest.mark.postgres
def test_postgres_search_counts_the_matches_once(conversation, member_a):
    # The kept matches and their per-term counts are materialised CTEs: each is computed
    # once, whatever plan (generic ones included: statements are prepared) joins them.
    from chats.retrieval.search import _postgres_sql

    add(conversation, member_a, *FILLER, "The garden needs water", "Water the plants")
    sql, params = _postgres_sql(
        conversation.tenant_id, conversation.pk, build_query("garden water"), 10, None
    )
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "CTE m" in plan and "CTE d" in plan
    hits = search(conversation, "garden water")
    assert len(hits) == 2 and hits[0].score > hits[1].score > 0


def test_sqlite_reads_messages_by_seq_through_an_index(db):
    """SQLite has no covering unique constraint (``message_unique_seq`` on PostgreSQL): its
    own index serves reads by seq, and survives all migrations (a table remake drops it)."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    with connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN QUERY PLAN SELECT id, content FROM chats_message "
            "WHERE tenant_id = 1 AND conversation_id = 2 AND seq IN (3, 4, 5)"
        )
        plan = " ".join(str(row[-1]) for row in cursor.fetchall())
    assert "message_seq_sqlite_idx (tenant_id=? AND conversation_id=? AND seq=?)" in plan


COMMON = "We decided the release date again"


@pytest.fixture
def small_scan(monkeypatch):
    """The PostgreSQL search's bounds scaled down, so a conversation of a few dozen messages
    is as long for it as one of 100,000 (scan 5,000, sample 2,000)."""
    from chats.retrieval import search as search_module

    monkeypatch.setattr(search_module, "PG_SCAN_LIMIT", 20)
    monkeypatch.setattr(search_module, "PG_SAMPLE_WINDOW", 10)


@pytest.mark.usefixtures("small_scan")
def test_a_rare_word_is_found_beyond_the_common_words_matches(conversation, member_a):
    # Common words match 60 messages, three times the scan: without pruning them the scan
    # keeps the newest 20 matches and the old fact with the rare word is never ranked.
    (fact,) = add(conversation, member_a, "The pelican ate the release notes in Lisbon.")
    common = add(conversation, member_a, *[f"{COMMON} ({i})." for i in range(60)])
    hits = search(conversation, "What did we decide about the pelican and the release?")
    assert hits[0].message_id == fact.pk
    # the newest messages with the common words are still found
    assert common[-1].pk in {h.message_id for h in hits}


@pytest.mark.postgres
@pytest.mark.usefixtures("small_scan")
def test_postgres_prunes_only_the_common_terms(conversation, member_a):
    from chats.retrieval.search import _postgres_sample

    add(conversation, member_a, "The pelican ate the release notes in Lisbon.")
    add(conversation, member_a, *[f"{COMMON} ({i})." for i in range(60)])
    query = build_query("What did we decide about the pelican and the release?")
    assert [t.text for t in query.terms] == ["decid", "pelican", "releas"]
    sample = _postgres_sample(connection, conversation.tenant_id, conversation.pk, query, None)
    assert sample is not None and sample.sampled == 10 and sample.total == 61
    assert sample.hits == (10, 0, 10)
    assert sample.pruned() == {0, 2}
    # a conversation no longer than the scan is not sampled
    short = conversation_create(tenant=conversation.tenant, created_by=member_a)
    add(short, member_a, *[f"{COMMON} ({i})." for i in range(20)])
    assert _postgres_sample(connection, short.tenant_id, short.pk, query, None) is None


@pytest.mark.postgres
@pytest.mark.usefixtures("small_scan")
def test_postgres_pruned_search_ranks_the_newest_common_matches_as_before(conversation, member_a):
    # When the sampled window holds enough matches, the pruned search returns what the full
    # scan returned: the same messages, in the same order.
    from chats.retrieval.search import _postgres_sample, _postgres_sql

    add(conversation, member_a, *FILLER * 5)
    add(conversation, member_a, *[f"{COMMON} ({i})." for i in range(60)])
    query = build_query("What did we decide about the release and the budget?")
    sample = _postgres_sample(connection, conversation.tenant_id, conversation.pk, query, None)
    assert sample is not None and sample.pruned() == {0, 1}

    def ids(sample):
        sql, params = _postgres_sql(conversation.tenant_id, conversation.pk, query, 5, None, sample)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return [row[0] for row in cursor.fetchall()]

    assert ids(sample) == ids(None)
    hits = search(conversation, "What did we decide about the release and the budget?", 5)
    assert [h.message_id for h in hits] == ids(None)


@pytest.mark.postgres
def test_postgres_search_is_planned_for_its_values_every_time(conversation, member_a):
    # A prepared statement settles on a generic plan after five runs; the search's best plan
    # depends on how many messages its terms match (at 100,000 messages a generic plan ran
    # ten times slower), so it is never prepared, whatever the connection's threshold.
    if not server_side_binding():
        pytest.skip("prepared statements need server-side binding (DB_SERVER_SIDE_BINDING=1)")
    add(conversation, member_a, *FILLER, "The garden needs water", "Water the plants")
    raw = connection.connection
    before = raw.prepare_threshold
    for _ in range(8):
        hits = search(conversation, "garden water")
        with connection.cursor() as cursor:  # a statement the connection does prepare
            cursor.execute("SELECT count(*) FROM chats_message WHERE seq > %s", [0])
    assert len(hits) == 2
    assert raw.prepare_threshold == before  # other statements: untouched
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert [s for s in prepared if "FROM chats_message WHERE seq >" in s]
    assert not [s for s in prepared if "to_tsquery" in s and "newest AS" in s]


def test_postgres_search_names_its_conversation_as_the_index_compares_it():
    # The index leads with the tenant and the conversation (btree_gin), which compares like
    # types only, and psycopg sends a small integer as smallint: compared as given, the
    # index would match the terms in every tenant's messages and filter them after.
    from chats.retrieval.search import _postgres_sql

    sql, _ = _postgres_sql(1, 2, build_query("garden water"), 10, None)
    assert "m.tenant_id = %s::bigint AND m.conversation_id = %s::bigint" in sql
