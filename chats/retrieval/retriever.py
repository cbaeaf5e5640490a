"""Older messages and summaries relevant to a new message, as ``RetrievedItem`` candidates
for the assembly.

:func:`retrieve_messages` runs a few bounded queries, whatever the conversation's
length: the indexed search (:func:`~chats.retrieval.search.search_messages`; on PostgreSQL a
conversation longer than its scan first samples its newest messages to prune the common
terms), one fetch of the candidates' rows, one look-up of the facts the best candidates
stated that were replaced (or that replaced theirs; ``memory.selectors.replaced_statements``),
and one fetch of the turns around the best candidates; another, the
conversation's newest stored vectors, when the policy searches by meaning too
(:mod:`chats.retrieval.dense`). Ranking happens in
:mod:`chats.retrieval.rerank` (pure). :func:`retrieve_summaries` adds the summaries the
prompt does not already show (one lookup of the shown ones, the indexed search, the rows);
merged (level-0) summaries stay searchable, since they hold the detail their merged parent
compresses. The caller passes the conversation it already holds; nothing else of the
conversation is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import numpy as np
from django.db import connection

from chatplatform.core.context.formatting import person_label
from chatplatform.core.context.types import MessageItem, RetrievedItem
from chatplatform.db import column_datetime, in_array
from chatplatform.models import ContextPolicy
from chatplatform.models.conversations import Conversation, MessageRole, Status
from chatplatform.tenancy.scoping import tenant_scope
from memory.selectors import replaced_statements
from summaries.models import Summary
from summaries.selectors import current_summaries

from .dense import WINDOW as DENSE_WINDOW
from .dense import dense_enabled, dense_scores, question_soon
from .query import SearchQuery, build_query
from .rerank import (
    DENSE_TOP_K,
    DENSE_WEIGHT,
    Candidate,
    RerankConfig,
    bm25_scores,
    rank_candidates,
    replies_whole_for,
    to_retrieved,
)
from .search import search_messages, search_summaries

#: Prefix of the ids of retrieved summaries (``"summary:12"``): they travel as RetrievedItems
#: next to messages, whose ids are integers, so the two can never collide.
SUMMARY_ID_PREFIX = "summary:"

#: Roles of messages retrieval may return (system prompts and the like stay out).
RETRIEVABLE_ROLES = (MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL)
SKIPPED_STATUSES = (Status.STREAMING, Status.FAILED)


@dataclass(frozen=True, slots=True)
class RetrievalSettings:
    """How much one retrieval may fetch and how it ranks.

    ``candidates``: hits asked from the search (their rows are fetched and re-ranked);
    ``neighbor_hits``: best candidates whose surrounding turns are fetched
    (``rerank.neighbor_depth`` on each side); ``max_items``: RetrievedItems returned;
    ``max_summaries``: summaries :func:`retrieve_summaries` returns; ``dense``: also search
    by meaning (:mod:`chats.retrieval.dense`, when the embeddings are installed): the
    ``dense_top_k`` nearest of the newest ``dense_window`` embedded messages join the
    candidates with ``dense_weight`` (:func:`~chats.retrieval.rerank.fuse_dense`).
    """

    candidates: int = 300
    neighbor_hits: int = 40
    max_items: int = 200
    rerank: RerankConfig = field(default_factory=RerankConfig)
    #: Older summaries (not already shown) retrieved next to messages.
    max_summaries: int = 3
    dense: bool = False
    dense_top_k: int = DENSE_TOP_K
    dense_weight: float = DENSE_WEIGHT
    dense_window: int = DENSE_WINDOW


class Row(NamedTuple):
    """One retrievable message as the candidates' read returns it: the columns ranking and
    the prompt need, and its author's names."""

    id: int
    seq: int
    role: str
    content: str
    token_count: int | None
    token_counter: str
    created_at: Any
    author_id: int | None
    username: str | None
    first_name: str | None
    last_name: str | None


_SUMMARY_FIELDS = (
    "id",
    "text",
    "first_seq",
    "last_seq",
    "token_count",
    "token_counter",
    "period_end",
    "created_at",
)


def _names(row: Row) -> list[str]:
    """The words a question may name the author by (first, last and user name)."""
    names = (row.first_name, row.last_name, row.username)
    return [w for n in names if n for w in str(n).split()]


def _item(row: Row, bot_name: str) -> MessageItem:
    """The pure view of a fetched row; labels as the recent-history selector makes them."""
    role = row.role
    if role == MessageRole.ASSISTANT:
        author = bot_name
    else:
        author = person_label(row.username, row.first_name, row.last_name)
    return MessageItem(
        id=row.id,
        seq=row.seq,
        role=role,  # type: ignore[arg-type]  # one of RETRIEVABLE_ROLES
        content=row.content,
        author=author,
        tokens=row.token_count,
        counted_by=row.token_counter or None,
        created_at=_created(row.created_at),
    )


def recalled_items(
    conversation: Conversation, ids: Iterable[Any], bot_name: str
) -> list[MessageItem]:
    """The retrieved messages a cached window holds, by their ids (summaries as
    ``"summary:<pk>"``), built exactly as retrieval built them: two bounded queries. A message
    or summary deleted since is missing from the result (the window then restarts)."""
    wanted = list(ids)
    message_ids = [i for i in wanted if isinstance(i, int)]
    summary_ids = [
        int(i.removeprefix(SUMMARY_ID_PREFIX))
        for i in wanted
        if isinstance(i, str) and i.startswith(SUMMARY_ID_PREFIX)
    ]
    items: dict[Any, MessageItem] = {}
    with tenant_scope(conversation.tenant_id):
        for row in _fetch(conversation, ids=message_ids):
            items[row.id] = _item(row, bot_name)
        if summary_ids:
            summaries = Summary.objects.filter(
                tenant_id=conversation.tenant_id,
                conversation_id=conversation.pk,
                pk__in=summary_ids,
            ).values(*_SUMMARY_FIELDS)
            for row in summaries:
                item = _summary_item(row)
                items[item.id] = item
    return [items[i] for i in wanted if i in items]


#: The candidates' read: the retrievable rows of one conversation by seq or by id (one
#: array parameter, so one statement whatever their number: PostgreSQL prepares it once per
#: connection), with their authors' names. Only the columns ranking and the prompt use.
_ROWS_SQL = """
    SELECT m.id, m.seq, m.role, m.content, m.token_count, m.token_counter, {created},
           m.author_id, u.username, u.first_name, u.last_name
    FROM chats_message m LEFT JOIN auth_user u ON u.id = m.author_id
    WHERE m.tenant_id = %s AND m.conversation_id = %s AND m.{key} {matches}
      AND m.role IN ({roles}) AND m.status NOT IN ({skipped}) AND m.seq < %s
    ORDER BY m.seq
"""
_ROLES = ", ".join(f"'{r}'" for r in RETRIEVABLE_ROLES)
_SKIPPED = ", ".join(f"'{s}'" for s in SKIPPED_STATUSES)
#: ``m.seq < %s`` without a bound.
_NO_BOUND = 2**62
#: The message's time as whole microseconds since the epoch on PostgreSQL: most rows read
#: never become items (:class:`_Items`), and an integer is read for a fraction of the cost
#: of a timestamp; :func:`_created` makes the datetime of those that do.
_CREATED = {"postgresql": "(extract(epoch FROM m.created_at) * 1000000)::bigint"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _created(value: Any) -> datetime | None:
    """A row's ``created_at`` as the ORM would give it (see :data:`_CREATED`)."""
    if isinstance(value, int):
        return _EPOCH + timedelta(microseconds=value)
    return column_datetime(value)


def _fetch(
    conversation: Conversation,
    *,
    seqs: Iterable[int] = (),
    ids: Iterable[int] = (),
    before_seq: int | None = None,
) -> list[Row]:
    """The retrievable rows of ``conversation`` with these ``seqs`` or these ``ids`` (one
    query; none for neither), older than ``before_seq`` when given."""
    by_seq, by_id = sorted(set(seqs)), sorted(set(ids))
    if not by_seq and not by_id:
        return []
    matches, wanted = in_array(by_seq or by_id)
    sql = _ROWS_SQL.format(
        created=_CREATED.get(connection.vendor, "m.created_at"),
        key="seq" if by_seq else "id",
        matches=matches,
        roles=_ROLES,
        skipped=_SKIPPED,
    )
    params = [
        conversation.tenant_id,
        conversation.pk,
        wanted,
        _NO_BOUND if before_seq is None else int(before_seq),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [Row._make(r) for r in cursor.fetchall()]


def retrieve_messages(
    conversation: Conversation,
    text: str,
    *,
    before_seq: int | None = None,
    settings: RetrievalSettings | None = None,
    query: SearchQuery | None = None,
    bot_name: str = "Assistant",
    question: Future[np.ndarray | None] | None = None,
) -> list[RetrievedItem]:
    """Messages of ``conversation`` (older than ``before_seq`` when given) relevant to
    ``text``, best first, at most ``settings.max_items``; each item carries the fetched
    turns around it as ``neighbors``. Empty when ``text`` has nothing searchable.
    ``question``: the embedding of ``text`` already started (``dense.question_soon``), else
    it starts here when the settings search by meaning.

    Four bounded queries (the search, the candidates' rows, the statements that replaced
    the best ones' facts or that theirs replaced, their neighbours; another for those
    statements' rows when some are not candidates), plus one (the stored vectors) with
    ``settings.dense`` when the embeddings are available; the candidates' rows are then read
    in two (the full-text hits' while the question is being embedded, then those found by
    meaning only) when the search ends first."""
    settings = settings or RetrievalSettings()
    config = settings.rerank
    query = query if query is not None else build_query(text)
    if query.is_empty or settings.max_items <= 0:
        return []
    # The question's embedding is computed while the full-text query runs.
    if not settings.dense or settings.dense_top_k <= 0:
        question = None
    elif question is None:
        question = question_soon(text)
    hits = search_messages(
        tenant_id=conversation.tenant_id,
        conversation_id=conversation.pk,
        query=query,
        limit=settings.candidates,
        before_seq=before_seq,
        conversation_size=max(conversation.message_count, conversation.last_seq),
    )
    wanted = {h.seq for h in hits}
    rows: dict[int, Row] = {}
    fetched: set[int] = set()
    if question is not None and not question.done():
        # The hits' rows are read while the question is still being embedded.
        rows = {r.seq: r for r in _fetch(conversation, seqs=wanted)}
        fetched = wanted
    near: dict[int, float] = {}
    if settings.dense:
        near = (
            dense_scores(
                conversation,
                text,
                before_seq=before_seq,
                top_k=settings.dense_top_k,
                window=settings.dense_window,
                question=question,
            )
            or {}
        )
    if not hits and not near:
        return []
    rows.update((r.seq, r) for r in _fetch(conversation, seqs=(wanted | near.keys()) - fetched))
    names = {r.author_id: _names(r) for r in rows.values() if r.author_id is not None}
    total = max(conversation.message_count, conversation.last_seq, len(rows))

    def fetch_neighbors(seqs: set[int]) -> list[Candidate]:
        if before_seq is not None:
            seqs = {seq for seq in seqs if seq < before_seq}
        fetched = _fetch(conversation, seqs=seqs)
        rows.update((r.seq, r) for r in fetched)
        return [_candidate(r) for r in fetched]

    def fetch_statements(hits: list[Candidate]) -> list[tuple[Candidate, Candidate]]:
        pairs = replaced_statements(
            conversation.tenant_id, conversation.pk, [int(c.id) for c in hits]
        )
        if not pairs:
            return []
        known = {r.id: r for r in rows.values()}
        missing = {i for pair in pairs for i in pair} - known.keys()
        for row in _fetch(conversation, ids=missing, before_seq=before_seq):
            rows[row.seq] = known[row.id] = row
        return [
            (_candidate(known[a]), _candidate(known[b]))
            for a, b in pairs
            if a in known and b in known
        ]

    order = rank_candidates(
        query,
        [_candidate(r) for r in rows.values()],
        total_docs=total,
        names=names,
        config=config,
        neighbor_hits=settings.neighbor_hits,
        fetch=fetch_neighbors,
        dense={seq: cosine for seq, cosine in near.items() if seq in rows},
        dense_weight=settings.dense_weight,
        statements=fetch_statements,
    )
    items = _Items(rows, bot_name)
    return to_retrieved(
        order,
        items,
        neighbors=config.neighbor_depth,
        max_items=settings.max_items,
        replies_whole=replies_whole_for(query, config),
    )


class _Items(Mapping[int, MessageItem]):
    """The items of fetched rows by seq, each built when first asked for: only the ranked
    candidates that make the list and their neighbours become items, not every row read."""

    def __init__(self, rows: Mapping[int, Row], bot_name: str) -> None:
        self._rows, self._bot_name = rows, bot_name
        self._built: dict[int, MessageItem] = {}

    def __getitem__(self, seq: int) -> MessageItem:
        item = self._built.get(seq)
        if item is None:
            item = self._built[seq] = _item(self._rows[seq], self._bot_name)
        return item

    def __contains__(self, seq: object) -> bool:
        return seq in self._rows

    def __iter__(self) -> Iterator[int]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


def _candidate(row: Row) -> Candidate:
    return Candidate(row.id, row.seq, row.content, row.author_id, row.role)


def shown_summary_ids(conversation: Conversation, *, max_rolling: int) -> set[int]:
    """Ids of this conversation's summaries the assembly shows anyway: those
    ``summaries.selectors.current_summaries`` picks (one query), less any carried over
    from an earlier conversation (they are never search results here)."""
    return {
        int(item.id)
        for item in current_summaries(conversation, max_rolling=max_rolling)
        if item.kind != "carried"
    }


def retrieve_summaries(
    conversation: Conversation,
    text: str,
    *,
    exclude_ids: Iterable[int] = (),
    settings: RetrievalSettings | None = None,
    query: SearchQuery | None = None,
) -> list[RetrievedItem]:
    """Summaries of ``conversation`` relevant to ``text`` that are not superseded nor in
    ``exclude_ids`` (those already in the prompt), best first, at most
    ``settings.max_summaries``: two bounded queries (the indexed search, the rows).

    Each comes as a RetrievedItem whose message has the id ``"summary:<pk>"``, the seq of
    the last message it covers (so the block shows it where its range ends), the end of its
    period as its time and ``summary of messages A-B`` as its speaker. Its score is BM25 of
    the same terms, IDF over the conversation's length, so it competes with messages on the
    same scale."""
    settings = settings or RetrievalSettings()
    query = query if query is not None else build_query(text)
    if query.is_empty or settings.max_summaries <= 0:
        return []
    hits = search_summaries(
        tenant_id=conversation.tenant_id,
        conversation_id=conversation.pk,
        query=query,
        limit=settings.max_summaries,
        exclude_ids=exclude_ids,
    )
    if not hits:
        return []
    with tenant_scope(conversation.tenant_id):
        rows = list(
            Summary.objects.filter(
                tenant_id=conversation.tenant_id, pk__in=[h.summary_id for h in hits]
            ).values(*_SUMMARY_FIELDS)
        )
    config = settings.rerank
    scores = bm25_scores(
        query.terms,
        [r["text"] for r in rows],
        total_docs=max(conversation.message_count, conversation.last_seq, len(rows)),
        k1=config.k1,
        b=config.b,
    )
    out = [
        RetrievedItem(_summary_item(row), value)
        for row, (value, matched) in zip(rows, scores, strict=True)
        if matched
    ]
    return sorted(out, key=lambda r: (-r.score, -r.message.seq))


def _summary_item(row: Mapping[str, Any]) -> MessageItem:
    return MessageItem(
        id=f"{SUMMARY_ID_PREFIX}{row['id']}",
        seq=row["last_seq"],
        role="user",
        content=row["text"],
        author=f"summary of messages {row['first_seq']}-{row['last_seq']}",
        tokens=row["token_count"],
        counted_by=row["token_counter"] or None,
        created_at=row["period_end"] or row["created_at"],
    )


def retrieve_ranked(
    conversation: Conversation,
    text: str,
    *,
    before_seq: int,
    settings: RetrievalSettings,
    shown_summaries: Iterable[int],
    bot_name: str = "Assistant",
    question: Future[np.ndarray | None] | None = None,
) -> list[RetrievedItem]:
    """Messages older than ``before_seq`` and summaries not in ``shown_summaries`` relevant
    to ``text``, ranked together on one scale (BM25), at most ``settings.max_items``
    (``question``: as :func:`retrieve_messages` takes it)."""
    query = build_query(text)
    messages = retrieve_messages(
        conversation,
        text,
        before_seq=before_seq,
        settings=settings,
        query=query,
        bot_name=bot_name,
        question=question,
    )
    summaries = retrieve_summaries(
        conversation, text, exclude_ids=shown_summaries, settings=settings, query=query
    )
    merged = sorted([*messages, *summaries], key=lambda r: -r.score)
    return merged[: max(0, settings.max_items)]


def retrieve_for_assembly(
    conversation: Conversation,
    new_message: MessageItem,
    policy: ContextPolicy,
    before_seq: int,
    shown_summaries: Iterable[int] | None = None,
    *,
    question: Future[np.ndarray | None] | None = None,
) -> list[RetrievedItem]:
    """The assembly service's retriever (``chats.assembly.service.Retriever``): candidates
    for ``new_message`` among messages with ``seq < before_seq`` and among the summaries the
    assembly does not already show (``shown_summaries``; looked up when not given), at most
    the policy's ``retrieval_max_items`` in all. The packer takes them by score.
    ``question``: the embedding of the new message, when the caller started it earlier
    (:func:`early_question`)."""
    if shown_summaries is None:
        shown_summaries = shown_summary_ids(
            conversation, max_rolling=policy.max_summaries_in_context
        )
    return retrieve_ranked(
        conversation,
        new_message.content,
        before_seq=before_seq,
        settings=RetrievalSettings(
            max_items=policy.retrieval_max_items, dense=dense_enabled(policy)
        ),
        shown_summaries=shown_summaries,
        bot_name=policy.bot_name,
        question=question,
    )


def early_question(
    new_message: MessageItem, policy: ContextPolicy
) -> Future[np.ndarray | None] | None:
    """The embedding of ``new_message`` started now, for :func:`retrieve_for_assembly` to
    take later, when the policy retrieves by meaning and the embeddings are installed
    (``None`` otherwise): the assembly starts it before its first query, so the model runs
    while the history, the full-text search and the candidates are read."""
    if new_message.seq <= 1 or policy.retrieval_max_items <= 0 or not dense_enabled(policy):
        return None
    return question_soon(new_message.content)
