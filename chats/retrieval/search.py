"""Full-text search over one conversation's messages and summaries: one bounded, indexed
query each.

The index lives in migration ``chats.0002_message_search``:

* PostgreSQL: ``chats_message.search_vector``, a STORED generated ``tsvector`` ('simple'
  configuration over ``lower()``ed, accent-folded text with CJK characters spaced apart), and a
  GIN index on ``(tenant_id, conversation_id, search_vector)`` (btree_gin) or on the vector
  alone when the extension cannot be created. The tenant and conversation are compared as
  ``bigint``, the columns' type: psycopg sends a small integer as ``smallint``, and btree_gin
  has no cross-type operators, so the index would match the terms in every tenant's messages
  and filter them after. Ranking: the sum of the IDF of the query terms a
  message contains, IDF counted over the conversation's matches (``ts_rank`` has no IDF). The
  newest :data:`PG_SCAN_LIMIT` matches are ranked; in a longer conversation the terms common
  in its newest :data:`PG_SAMPLE_WINDOW` messages are matched only there, the rarer ones
  everywhere (document-frequency pruning, the rule in
  :func:`~chats.retrieval.query.whole_history_terms`): the common words' matches are most of
  what the scan reads, and they would push a rare word's old matches out of it.
* SQLite: ``chats_message_fts``, a contentless FTS5 table (``unicode61 remove_diacritics 2``)
  kept in sync by triggers, with a ``scope`` column holding ``t<tenant>c<conversation>`` so a
  search intersects the conversation's posting list instead of filtering every tenant's
  matches. Ranking: ``bm25()``. The unicode61 tokenizer keeps unsegmented CJK runs whole, so a
  query with CJK bigrams instead scans the conversation's newest :data:`SQLITE_SCAN_WINDOW`
  messages (bounded, via the ``(tenant, conversation, seq)`` index).

Summaries (:func:`search_summaries`) have the same index design over their ``text``
(migration ``summaries.0004_summary_search``: ``summaries_summary.search_vector`` + GIN, or
``summaries_summary_fts``); PostgreSQL ranks them with ``ts_rank_cd``.

Every query names the tenant and the conversation; callers never see another tenant's rows
whatever the text matches.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from django.db import connections

from chatplatform.db import execute_planned

from .query import SearchQuery, Term, estimated_matches, term_tsquery, whole_history_terms

#: Most hits one search returns, and most matches PostgreSQL ranks (newest first).
MAX_LIMIT = 1000
PG_SCAN_LIMIT = 5000
#: Newest messages whose matches estimate each term's share of a conversation longer than
#: :data:`PG_SCAN_LIMIT`; the terms found too often there are matched only among them
#: (:func:`~chats.retrieval.query.whole_history_terms`).
PG_SAMPLE_WINDOW = 2000
#: Newest messages the SQLite CJK fallback looks at.
SQLITE_SCAN_WINDOW = 5000


class Hit(NamedTuple):
    """A matching message; ``score`` is higher for better matches (comparable within one
    search only)."""

    message_id: int
    seq: int
    score: float


def search_messages(
    *,
    tenant_id: int,
    conversation_id: int,
    query: SearchQuery,
    limit: int,
    before_seq: int | None = None,
    conversation_size: int | None = None,
    using: str = "default",
) -> list[Hit]:
    """The best ``limit`` messages of the conversation matching ``query`` (OR of its terms),
    best first; only messages with ``seq < before_seq`` when given. One query; an empty query
    or a zero limit runs none. On PostgreSQL a conversation longer than
    :data:`PG_SCAN_LIMIT` messages (``conversation_size``, when the caller knows it) takes one
    more, bounded query first: its terms' matches among the newest
    :data:`PG_SAMPLE_WINDOW` messages, which decide the terms matched over the whole
    conversation (:func:`_postgres_sample`)."""
    limit = max(0, min(int(limit), MAX_LIMIT))
    if query.is_empty or limit == 0:
        return []
    connection = connections[using]
    if connection.vendor == "postgresql":
        sample = None
        if conversation_size is None or conversation_size > PG_SCAN_LIMIT:
            sample = _postgres_sample(connection, tenant_id, conversation_id, query, before_seq)
        sql, params = _postgres_sql(tenant_id, conversation_id, query, limit, before_seq, sample)
    elif connection.vendor == "sqlite":
        if any(t.bigram for t in query.terms):
            sql, params = _sqlite_scan_sql(tenant_id, conversation_id, query, limit, before_seq)
        else:
            sql, params = _sqlite_fts_sql(tenant_id, conversation_id, query, limit, before_seq)
    else:  # pragma: no cover - other backends have no index
        raise NotImplementedError(f"no message search for {connection.vendor}")
    with connection.cursor() as cursor:
        execute_planned(cursor, sql, params)
        rows = cursor.fetchall()
    return [Hit(int(r[0]), int(r[1]), float(r[2] or 0.0)) for r in rows]


def _seq_clause(before_seq: int | None, column: str, params: list[Any]) -> str:
    if before_seq is None:
        return ""
    params.append(int(before_seq))
    return f" AND {column} < %s"


class Sample(NamedTuple):
    """Each term's matches (``hits``, in the query's order) among the newest ``sampled``
    messages of a conversation of ``total``."""

    sampled: int
    total: int
    hits: tuple[int, ...]

    def pruned(self) -> frozenset[int]:
        """The terms matched only among the sampled messages (none when all fit)."""
        kept = whole_history_terms(
            self.hits, sampled=self.sampled, total=self.total, scan_limit=PG_SCAN_LIMIT
        )
        return frozenset(range(len(self.hits))) - kept


def _postgres_sample(
    connection: Any,
    tenant_id: int,
    conversation_id: int,
    query: SearchQuery,
    before_seq: int | None,
) -> Sample | None:
    """Each term's matches among the conversation's newest :data:`PG_SAMPLE_WINDOW` messages
    (one walk of the ``(tenant, conversation, seq)`` index); ``None`` when the conversation
    holds no more than :data:`PG_SCAN_LIMIT` messages (nothing to prune)."""
    terms = query.terms
    params: list[Any] = [term_tsquery(t) for t in terms]
    params += [conversation_id, tenant_id, tenant_id, conversation_id]
    seq_clause = _seq_clause(before_seq, "seq", params)
    params.append(PG_SAMPLE_WINDOW)
    qcols = ", ".join(f"to_tsquery('simple', %s) AS q{i}" for i in range(len(terms)))
    hcols = ", ".join(f"count(*) FILTER (WHERE w.v @@ q.q{i})" for i in range(len(terms)))
    sql = f"""
        WITH q AS MATERIALIZED (SELECT {qcols})
        SELECT (SELECT c.message_count FROM chats_conversation c
                WHERE c.id = %s AND c.tenant_id = %s),
               count(*), {hcols}
        FROM (
            SELECT search_vector AS v FROM chats_message
            WHERE tenant_id = %s AND conversation_id = %s{seq_clause}
            ORDER BY seq DESC
            LIMIT %s
        ) w, q
    """  # noqa: S608 - only generated column names are interpolated
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    total, sampled = int(row[0] or 0), int(row[1])
    if max(total, sampled) <= PG_SCAN_LIMIT:
        return None
    return Sample(sampled, total, tuple(int(n) for n in row[2:]))


def _postgres_sql(
    tenant_id: int,
    conversation_id: int,
    query: SearchQuery,
    limit: int,
    before_seq: int | None,
    sample: Sample | None = None,
) -> tuple[str, list[Any]]:
    """The newest :data:`PG_SCAN_LIMIT` matches of the OR of the terms, each scored by the
    IDF (counted among them) of the terms it contains, the best ``limit`` returned.

    With a ``sample`` whose common terms are pruned (:meth:`Sample.pruned`), the matches are
    those of the other terms over the whole conversation and of every term among the
    sampled messages, and a pruned term's count is at least its estimated matches (its IDF
    stays that of a common word).

    The matches are sorted by seq as narrow rows (their addresses), then only the newest are
    read again to test each term once (``h<i>``); ``m`` and ``d`` are materialised, so no plan
    recounts ``d`` per row. The statement is planned for its values on every run
    (:func:`~chatplatform.db.execute_planned`), never prepared."""
    terms = query.terms
    pruned = sample.pruned() if sample is not None else frozenset()
    params: list[Any] = [term_tsquery(t) for t in terms]
    params.append(query.tsquery())
    if pruned:
        params.append(" | ".join(term_tsquery(t) for i, t in enumerate(terms) if i not in pruned))
    params += [tenant_id, conversation_id]
    seq_clause = _seq_clause(before_seq, "m.seq", params)
    params.append(PG_SCAN_LIMIT)
    window = ""
    if pruned:
        params += [tenant_id, conversation_id]
        window_clause = _seq_clause(before_seq, "seq", params)
        params.append(PG_SAMPLE_WINDOW)
        window = f"""
            UNION
            SELECT w.address FROM (
                SELECT ctid AS address, search_vector FROM chats_message
                WHERE tenant_id = %s AND conversation_id = %s{window_clause}
                ORDER BY seq DESC
                LIMIT %s
            ) w, q
            WHERE w.search_vector @@ q.qall"""  # noqa: S608 - a fixed clause
    floors: list[str] = []
    for i in range(len(terms)):
        if i in pruned:
            assert sample is not None
            estimate = estimated_matches(sample.hits[i], sampled=sample.sampled, total=sample.total)
            floors.append(f"GREATEST(count(*) FILTER (WHERE m.h{i}), %s) AS d{i}")
            params.append(round(estimate))
        else:
            floors.append(f"count(*) FILTER (WHERE m.h{i}) AS d{i}")
    params += [conversation_id, tenant_id]
    params.append(limit)
    qcols = ", ".join(f"to_tsquery('simple', %s) AS q{i}" for i in range(len(terms)))
    if pruned:
        qcols += ", to_tsquery('simple', %s) AS qall, to_tsquery('simple', %s) AS qkept"
        matched = "q.qkept"
    else:
        qcols += ", to_tsquery('simple', %s) AS qall"
        matched = "q.qall"
    hcols = ", ".join(f"m.search_vector @@ q.q{i} AS h{i}" for i in range(len(terms)))
    dcols = ", ".join(floors)
    score = " + ".join(
        f"CASE WHEN m.h{i} THEN {_weight(t)} * "
        f"ln(1.0 + (d.n - d.d{i} + 0.5) / (d.d{i} + 0.5)) ELSE 0 END"
        for i, t in enumerate(terms)
    )
    sql = f"""
        WITH q AS (SELECT {qcols}),
        newest AS ((
            SELECT m.ctid AS address
            FROM chats_message m, q
            WHERE m.tenant_id = %s::bigint AND m.conversation_id = %s::bigint{seq_clause}
              AND m.search_vector @@ {matched}
            ORDER BY m.seq DESC
            LIMIT %s
        ){window}),
        m AS MATERIALIZED (
            SELECT m.id, m.seq, {hcols}
            FROM chats_message m, q
            WHERE m.ctid = ANY(ARRAY(SELECT address FROM newest))
        ),
        d AS MATERIALIZED (
            SELECT {dcols}, GREATEST(
                count(*),
                (SELECT c.message_count FROM chats_conversation c
                 WHERE c.id = %s AND c.tenant_id = %s)
            )::float8 AS n
            FROM m
        )
        SELECT m.id, m.seq, ({score}) AS score
        FROM m, d
        ORDER BY score DESC, m.seq DESC
        LIMIT %s
    """  # noqa: S608 - only generated column names and numbers are interpolated
    return sql, params


def _weight(term: Term) -> str:
    return repr(float(term.weight))


def _scope(tenant_id: int, conversation_id: int) -> str:
    return f"t{int(tenant_id)}c{int(conversation_id)}"


def _sqlite_fts_sql(
    tenant_id: int, conversation_id: int, query: SearchQuery, limit: int, before_seq: int | None
) -> tuple[str, list[Any]]:
    match = f'scope : "{_scope(tenant_id, conversation_id)}" AND body : ({query.fts5()})'
    params: list[Any] = [match, tenant_id, conversation_id]
    seq_clause = _seq_clause(before_seq, "m.seq", params)
    params.append(limit)
    sql = f"""
        SELECT m.id, m.seq, -bm25(chats_message_fts, 0.0, 1.0) AS score
        FROM chats_message_fts
        JOIN chats_message m ON m.id = chats_message_fts.rowid
        WHERE chats_message_fts MATCH %s
          AND m.tenant_id = %s AND m.conversation_id = %s{seq_clause}
        ORDER BY score DESC, m.seq DESC
        LIMIT %s
    """  # noqa: S608 - only a fixed clause is interpolated
    return sql, params


def _sqlite_scan_sql(
    tenant_id: int, conversation_id: int, query: SearchQuery, limit: int, before_seq: int | None
) -> tuple[str, list[Any]]:
    parts: list[str] = []
    params: list[Any] = []
    for term in query.terms:
        parts.append(f"(CASE WHEN instr(lower(m.content), %s) > 0 THEN {_weight(term)} END)")
        params.append(term.text)
    score = " + ".join(f"coalesce({p}, 0)" for p in parts)
    params += [tenant_id, conversation_id]
    seq_clause = _seq_clause(before_seq, "m.seq", params)
    params += [tenant_id, conversation_id]
    newest_clause = _seq_clause(before_seq, "seq", params)
    params += [SQLITE_SCAN_WINDOW, limit]
    sql = f"""
        SELECT id, seq, score FROM (
            SELECT m.id, m.seq, ({score}) AS score
            FROM chats_message m
            WHERE m.tenant_id = %s AND m.conversation_id = %s{seq_clause}
              AND m.seq >= (
                  SELECT coalesce(min(seq), 0) FROM (
                      SELECT seq FROM chats_message
                      WHERE tenant_id = %s AND conversation_id = %s{newest_clause}
                      ORDER BY seq DESC LIMIT %s
                  )
              )
        )
        WHERE score > 0
        ORDER BY score DESC, seq DESC
        LIMIT %s
    """  # noqa: S608 - only generated fragments and numbers are interpolated
    return sql, params


#: Most summaries one search returns (a conversation has one per few dozen messages).
MAX_SUMMARY_LIMIT = 100
#: Newest summaries the SQLite CJK fallback looks at.
SQLITE_SUMMARY_SCAN_WINDOW = 500


class SummaryHit(NamedTuple):
    """A matching summary; ``score`` is higher for better matches (within one search)."""

    summary_id: int
    score: float


def search_summaries(
    *,
    tenant_id: int,
    conversation_id: int,
    query: SearchQuery,
    limit: int,
    exclude_ids: Iterable[int] = (),
    using: str = "default",
) -> list[SummaryHit]:
    """The best ``limit`` summaries of the conversation matching ``query`` (OR of its terms),
    best first, leaving out superseded summaries and ``exclude_ids`` (those the prompt
    already shows). One query (PostgreSQL ``ts_rank_cd`` over the GIN-indexed
    ``search_vector``; SQLite FTS5 ``bm25()``); an empty query or a zero limit runs none."""
    limit = max(0, min(int(limit), MAX_SUMMARY_LIMIT))
    if query.is_empty or limit == 0:
        return []
    excluded = sorted({int(i) for i in exclude_ids})
    connection = connections[using]
    params: list[Any]
    if connection.vendor == "postgresql":
        params = [query.tsquery(), tenant_id, conversation_id]
        sql = """
            SELECT s.id, ts_rank_cd(s.search_vector, q.qall) AS score
            FROM summaries_summary s, (SELECT to_tsquery('simple', %s) AS qall) q
            WHERE s.tenant_id = %s::bigint AND s.conversation_id = %s::bigint
              AND s.superseded_at IS NULL AND s.search_vector @@ q.qall"""
    elif connection.vendor == "sqlite" and any(t.bigram for t in query.terms):
        parts = [f"coalesce((CASE WHEN instr(lower(s.text), %s) > 0 THEN {_weight(t)} END), 0)"
                 for t in query.terms]  # fmt: skip
        params = [t.text for t in query.terms]
        params += [tenant_id, conversation_id, SQLITE_SUMMARY_SCAN_WINDOW]
        sql = f"""
            SELECT id, score FROM (
                SELECT s.id, ({" + ".join(parts)}) AS score, s.superseded_at
                FROM summaries_summary s
                WHERE s.tenant_id = %s AND s.conversation_id = %s
                ORDER BY s.last_seq DESC LIMIT %s
            ) s
            WHERE s.score > 0 AND s.superseded_at IS NULL"""  # noqa: S608 - generated fragments
    elif connection.vendor == "sqlite":
        match = f'scope : "{_scope(tenant_id, conversation_id)}" AND body : ({query.fts5()})'
        params = [match, tenant_id, conversation_id]
        sql = """
            SELECT s.id, -bm25(summaries_summary_fts, 0.0, 1.0) AS score
            FROM summaries_summary_fts
            JOIN summaries_summary s ON s.id = summaries_summary_fts.rowid
            WHERE summaries_summary_fts MATCH %s
              AND s.tenant_id = %s AND s.conversation_id = %s AND s.superseded_at IS NULL"""
    else:  # pragma: no cover - other backends have no index
        raise NotImplementedError(f"no summary search for {connection.vendor}")
    if excluded:
        sql += f" AND s.id NOT IN ({', '.join(['%s'] * len(excluded))})"
        params += excluded
    sql += " ORDER BY score DESC, s.id DESC LIMIT %s"
    params.append(limit)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [SummaryHit(int(r[0]), float(r[1] or 0.0)) for r in rows]
