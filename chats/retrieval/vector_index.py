"""A conversation's nearest-neighbour index over its message embeddings: kept by the embedding
job, stored in the database (``MessageVectorIndex``), read by every process through a bounded
per-process cache.

* **Writing** (the embedding job, after it stores vectors): :func:`index_update` adds to the
  stored index the vectors it does not hold yet (``MessageEmbedding`` ids above its
  ``covered_id``), at most :data:`INDEX_ADD_BATCH` per run, and saves it with a new
  ``version``; it rebuilds from scratch when dropped vectors (edited or deleted messages)
  pass :data:`STALE_FRACTION` of it, when vectors are missing from it, or when it was saved
  by another engine. A conversation of at most :data:`EXACT_LIMIT` messages gets no index
  (the exact scan is as fast), and a few new vectors do not rewrite it: only once
  :data:`TAIL_REWRITE` of them wait.
* **Reading** (the reply path, :func:`index_nearest`): the process's copy of the index (loaded
  once per ``version``; the stored version is checked at most every
  :data:`REFRESH_SECONDS`, and a copy found older is still right, only with more vectors
  scanned exactly) gives about ``top_k`` candidate ids; one query reads those that still
  exist (a dropped vector or a deleted message is gone from ``MessageEmbedding``, so never
  returned) and one reads the vectors newer than the index, at most ``tail`` of them; all are
  scored exactly by cosine. A turn never waits for a rebuild.

Tenancy: the index row is tenant-owned; every read is filtered by tenant, conversation and
model, and the candidates the graph names are checked against the same filter, so a
conversation's index never yields another conversation's messages.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from chatplatform.db import in_array
from chatplatform.models.conversations import Conversation, MessageEmbedding, MessageVectorIndex
from chatplatform.tenancy.scoping import tenant_scope

from . import ann, embeddings

logger = logging.getLogger(__name__)

#: Conversations of at most this many messages are scanned exactly, without an index.
#: Measured on PostgreSQL (2 shared cores, medians of 30, p95 in brackets): reading and
#: scoring the newest 1,000 vectors 6 (10-13) ms, 2,000 24-32 (36-38) ms, 5,000 49-64
#: (62-77) ms; through an index of as many, candidates read and scored, 2 (3-5) ms, 3-6
#: (9-14) ms, 5-8 (8-15) ms (the graph search itself 0.1-0.2 ms; 100,000 vectors: 0.3 ms,
#: 3 ms with the reads). Past 1,000 the exact scan costs a turn far more than the index;
#: below it the difference is a few milliseconds, not worth an index to build (0.1 s), store
#: and hold in every process (usearch reserves ~16 MB per loaded index, whatever its size).
EXACT_LIMIT = 1000
#: Vectors the job adds to an index per run (~25 s of one core at 384 dimensions); more runs
#: follow while some remain.
INDEX_ADD_BATCH = 20_000
#: The job rewrites a stored index only once this many vectors wait beyond it: until then a
#: turn scans them exactly (a few milliseconds), and a busy conversation's index is not
#: rewritten (and reloaded by every process) after every reply.
TAIL_REWRITE = 1000
#: Rebuild when more than this share of the index's vectors were dropped.
STALE_FRACTION = 0.2
#: Extra candidates asked of the graph, for those filtered out (dropped, newer than the turn).
SEARCH_SLACK = 32
#: How often a process checks the stored version of an index it holds.
REFRESH_SECONDS = 15.0
#: What the per-process cache may hold, in bytes of loaded indexes (~55 MB per 100,000
#: vectors) and in indexes.
CACHE_BYTES = 384 * 1024 * 1024
CACHE_ENTRIES = 32


def enabled() -> bool:
    """Whether indexes are used here (the ``usearch`` package is installed)."""
    return ann.available()


# --- the per-process cache ---------------------------------------------------------------


@dataclass
class Loaded:
    version: int
    covered_id: int
    index: ann.AnnIndex
    checked_at: float


class IndexCache:
    """Loaded indexes by ``(tenant, conversation, model)``, least recently used evicted past
    :data:`CACHE_BYTES` or :data:`CACHE_ENTRIES`. Thread-safe; a loaded index is only read."""

    def __init__(self, max_bytes: int = CACHE_BYTES, max_entries: int = CACHE_ENTRIES) -> None:
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self._entries: OrderedDict[tuple[int, int, str], Loaded] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[int, int, str]) -> Loaded | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: tuple[int, int, str], entry: Loaded) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > 1 and (
                len(self._entries) > self.max_entries or self.nbytes() > self.max_bytes
            ):
                self._entries.popitem(last=False)

    def drop(self, key: tuple[int, int, str]) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def nbytes(self) -> int:
        return sum(entry.index.nbytes for entry in self._entries.values())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __iter__(self) -> Iterator[tuple[int, int, str]]:
        with self._lock:
            return iter(list(self._entries))


cache = IndexCache()


def _rows(tenant_id: int, conversation_id: int) -> Any:
    return MessageVectorIndex.objects.filter(
        tenant_id=tenant_id, conversation_id=conversation_id, model=embeddings.MODEL_NAME
    )


def loaded_index(conversation: Conversation) -> Loaded | None:
    """The process's copy of the conversation's index (``None``: it has none yet). Queries the
    database only on a miss, or to check the version every :data:`REFRESH_SECONDS`."""
    tenant_id, conversation_id = conversation.tenant_id, conversation.pk
    key = (tenant_id, conversation_id, embeddings.MODEL_NAME)
    entry = cache.get(key)
    now = time.monotonic()
    if entry is not None and now - entry.checked_at < REFRESH_SECONDS:
        return entry
    with tenant_scope(tenant_id):
        rows = _rows(tenant_id, conversation_id).filter(engine=ann.ENGINE)
        if entry is not None:
            current = rows.values_list("version", flat=True).first()
            if current == entry.version:
                entry.checked_at = now
                return entry
        found = rows.values_list("version", "covered_id", "data").first()
    if found is None:
        cache.drop(key)
        return None
    version, covered_id, data = found
    try:
        index = ann.AnnIndex.from_bytes(data)
    except Exception:  # a corrupt row must not fail the turn: the job rebuilds it
        logger.exception("could not load the vector index of conversation %s", conversation_id)
        cache.drop(key)
        return None
    entry = Loaded(int(version), int(covered_id), index, now)
    cache.put(key, entry)
    return entry


# --- reading -------------------------------------------------------------------------------


def index_nearest(
    conversation: Conversation,
    query: np.ndarray,
    *,
    before_seq: int | None,
    top_k: int,
    tail: int,
) -> dict[int, float] | None:
    """The ``top_k`` embedded messages (seq → cosine) nearest to the unit vector ``query``
    among all of the conversation's older than ``before_seq``, through its index plus an
    exact scan of at most ``tail`` newer vectors; ``None`` when it has no index (the caller
    scans exactly). One query (two when the stored version is checked, three on a load)."""
    entry = loaded_index(conversation)
    if entry is None:
        return None
    keys = entry.index.search(query, top_k + SEARCH_SLACK)
    rows = _candidate_vectors(conversation, keys, before_seq, entry.covered_id, tail)
    by_seq = dict(rows)
    seqs = np.fromiter(by_seq.keys(), dtype=np.int64, count=len(by_seq))
    vectors = embeddings.from_bytes(list(by_seq.values()))
    return embeddings.top_by_cosine(seqs, vectors, query, top_k)


#: The graph's candidates that still exist (a dropped vector or a deleted message is gone
#: from the table), then the vectors newer than the index, at most ``tail`` of them: one
#: statement (one array parameter, so PostgreSQL prepares it once per connection).
_CANDIDATES_SQL = """
    SELECT seq, vector FROM chats_messageembedding
    WHERE tenant_id = %s AND conversation_id = %s AND model = %s AND seq < %s
      AND id {matches}
    UNION ALL
    SELECT seq, vector FROM (
        SELECT seq, vector FROM chats_messageembedding
        WHERE tenant_id = %s AND conversation_id = %s AND model = %s AND seq < %s
          AND id > %s
        ORDER BY id DESC
        LIMIT %s
    ) newer
"""
#: ``seq < %s`` without a bound.
_NO_BOUND = 2**62


def _candidate_vectors(
    conversation: Conversation, keys: list[int], before_seq: int | None, covered_id: int, tail: int
) -> list[tuple[int, bytes]]:
    """``(seq, vector)`` of the index's candidates ``keys`` and of the vectors past
    ``covered_id`` (the newest ``tail``), older than ``before_seq``."""
    matches, wanted = in_array(keys)
    scope = [
        conversation.tenant_id,
        conversation.pk,
        embeddings.MODEL_NAME,
        _NO_BOUND if before_seq is None else int(before_seq),
    ]
    params = [
        *scope,
        wanted,
        *scope,
        int(covered_id),
        max(0, tail),
    ]
    with connection.cursor() as cursor:
        cursor.execute(_CANDIDATES_SQL.format(matches=matches), params)
        return [(int(seq), vector) for seq, vector in cursor.fetchall()]


# --- writing -------------------------------------------------------------------------------


def index_due(tenant_id: int, conversation_id: int, message_count: int) -> bool:
    """Whether :func:`index_update` has work: the conversation is past :data:`EXACT_LIMIT`
    and has no index while it has vectors, or :data:`TAIL_REWRITE` vectors wait beyond it
    (two small queries; for the beat sweep)."""
    if not enabled() or message_count <= EXACT_LIMIT:
        return False
    with tenant_scope(tenant_id):
        stored = _rows(tenant_id, conversation_id).values_list("covered_id", "engine").first()
        covered = int(stored[0]) if stored is not None and stored[1] == ann.ENGINE else 0
        waiting = MessageEmbedding.objects.filter(
            tenant_id=tenant_id,
            conversation_id=conversation_id,
            model=embeddings.MODEL_NAME,
            pk__gt=covered,
        )
        return (waiting[max(0, TAIL_REWRITE - 1) :] if covered else waiting).exists()


@dataclass
class IndexResult:
    #: "none" (small or nothing to index), "current" (few new vectors: left as it is),
    #: "added", "built" (from scratch), "unavailable" (no usearch).
    status: str
    size: int = 0
    #: Vectors remain to be added: the job runs again.
    more: bool = False


def _vectors(queryset: Any, limit: int) -> tuple[np.ndarray, np.ndarray]:
    fetched = list(queryset.order_by("pk").values_list("pk", "vector")[:limit])
    ids = np.fromiter((pk for pk, _ in fetched), dtype=np.int64, count=len(fetched))
    return ids, embeddings.from_bytes([vector for _, vector in fetched])


def index_update(
    tenant_id: int,
    conversation_id: int,
    *,
    message_count: int,
) -> IndexResult:
    """Bring the conversation's stored index up to date with its vectors (bounded: at most
    :data:`INDEX_ADD_BATCH` added per call). Idempotent: a second call with nothing new
    changes nothing. The caller serialises calls per conversation (the embedding job's
    lock)."""
    if not enabled():
        return IndexResult("unavailable")
    with tenant_scope(tenant_id):
        vectors = MessageEmbedding.objects.filter(
            tenant_id=tenant_id, conversation_id=conversation_id, model=embeddings.MODEL_NAME
        )
        stored = _rows(tenant_id, conversation_id).defer("data").first()  # read when needed
        index: ann.AnnIndex | None = None
        covered, size = 0, 0
        if stored is not None and stored.engine == ann.ENGINE:
            covered, size = stored.covered_id, stored.size
            live = vectors.filter(pk__lte=covered).count()
            if live > size or size - live > STALE_FRACTION * size:
                covered, size = 0, 0  # vectors missing from it, or too many dropped: rebuild
        waiting = vectors.filter(pk__gt=covered)
        if stored is None or covered == 0:
            if message_count <= EXACT_LIMIT or not waiting.exists():
                return IndexResult("none")
        elif not waiting[max(0, TAIL_REWRITE - 1) :].exists():
            return IndexResult("current", size=size)
        loaded = False
        if covered and stored is not None:
            try:
                index, loaded = ann.AnnIndex.from_bytes(stored.data), True
            except Exception:
                logger.exception("rebuilding the unreadable index of %s", conversation_id)
                covered, size, waiting = 0, 0, vectors
        if index is None:
            index = ann.AnnIndex.new(embeddings.DIMENSIONS)
        ids, matrix = _vectors(waiting, INDEX_ADD_BATCH)
        index.add(ids, matrix)
        covered = int(ids[-1]) if len(ids) else covered
        size += len(ids)
        more = len(ids) >= INDEX_ADD_BATCH and vectors.filter(pk__gt=covered).exists()
        fields = {
            "engine": ann.ENGINE,
            "data": index.to_bytes(),
            "size": size,
            "covered_id": covered,
            "updated_at": timezone.now(),
        }
        status = "added" if loaded else "built"
        with transaction.atomic():
            if stored is None:
                try:
                    with transaction.atomic():
                        MessageVectorIndex.objects.create(
                            tenant_id=tenant_id,
                            conversation_id=conversation_id,
                            model=embeddings.MODEL_NAME,
                            **fields,
                        )
                except IntegrityError:  # written meanwhile by another run: the next one adds
                    return IndexResult("none")
            else:
                MessageVectorIndex.objects.filter(pk=stored.pk).update(
                    version=F("version") + 1, **fields
                )
    return IndexResult(status, size=size, more=more)
