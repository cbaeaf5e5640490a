"""Dense retrieval: message embeddings stored per tenant, and older messages found by meaning.

Enabled per policy (``ContextPolicy.retrieval_dense``, hybrid strategy only) and only where the
optional embeddings requirements are installed (:func:`chats.retrieval.embeddings.available`);
otherwise retrieval is full-text only and the turn's breakdown says so (:func:`dense_status`).

* **Writing** (Celery, never on the reply path): :func:`schedule_embedding` after each reply
  queues ``chats.tasks.embed_conversation_messages`` (at most one per conversation per
  :data:`SCHEDULE_WINDOW_SECONDS`), which runs :func:`embed_conversation`: the conversation's
  messages without a vector, newest first and however old, :data:`EMBED_BATCH` per run,
  inserted idempotently (:func:`embed_messages`); once none is left, its nearest-neighbour
  index is brought up to date (:func:`chats.retrieval.vector_index.index_update`: built past
  :data:`~chats.retrieval.vector_index.EXACT_LIMIT` messages, then added to in bounded
  runs). One run per conversation at a time. The beat task
  ``chats.tasks.backfill_message_embeddings`` sweeps dense-enabled conversations in bounded
  batches (:func:`backfill_batch`) for what the per-reply runs missed (history from before
  the policy was enabled, a lost task, an index left behind).
* **Reading** (the reply path): :func:`question_soon` starts embedding the new message
  (~10 ms) on a thread of its own while the retriever runs its full-text query; then
  :func:`dense_scores` searches every embedded message of the conversation older than
  ``before_seq``: a
  conversation of at most :data:`~chats.retrieval.vector_index.EXACT_LIMIT` messages (or
  without an index yet, or where ``usearch`` is missing) by reading its newest
  :data:`WINDOW` vectors in one indexed range query (``embedding_unique_seq``) and one matrix
  product; a longer one through its index (:func:`chats.retrieval.vector_index.index_nearest`:
  the graph's candidates, checked against the stored vectors, plus the few vectors newer than
  the index, scored exactly). The retriever fuses the top
  :data:`~chats.retrieval.rerank.DENSE_TOP_K` into its lexical ranking
  (:func:`chats.retrieval.rerank.fuse_dense`). Messages without a vector yet are simply found
  by their words only; a message whose vector was dropped (edited) or that was deleted is
  never returned by meaning.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
from django.db.models import Exists, OuterRef, Q

from chatplatform.core.context.strategies import strategy_for, strategy_names
from chatplatform.locks import exclusive
from chatplatform.models import ContextPolicy, Tenant
from chatplatform.models.conversations import (
    Conversation,
    Message,
    MessageEmbedding,
    MessageRole,
    Status,
)
from chatplatform.policies import DEFAULT_PRESET, policy_for
from chatplatform.tenancy.scoping import all_tenants, tenant_scope

from . import embeddings, vector_index

logger = logging.getLogger(__name__)

#: Vectors one retrieval scans exactly, at most (~4 MB of float16, whatever the
#: conversation's length): a conversation without an index (small, not indexed yet, or no
#: ``usearch`` here) is searched in its newest this many; one with an index, in the index
#: plus the vectors newer than it (at most this many, a few hundred once the job caught up).
WINDOW = 5000
#: Messages embedded per task run (~3 s of CPU for MiniLM on one thread); more re-enqueues.
EMBED_BATCH = 256
#: One embedding task per conversation per this many seconds, sent with this delay, so a
#: busy conversation's turns are embedded together.
SCHEDULE_WINDOW_SECONDS = 30
#: Claim name in :func:`chatplatform.locks.claim_run` (scoped by tenant and conversation).
SCHEDULE_CLAIM = "embed_conversation_messages"
#: Conversations the beat sweep looks at per batch.
BACKFILL_BATCH = 200
#: One embedding run per conversation at a time (its vectors, then its index): the lock's
#: expiry, past the task's hard time limit.
EMBED_LOCK_SECONDS = 180

RETRIEVABLE_ROLES = (MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL)
SKIPPED_STATUSES = (Status.STREAMING, Status.FAILED)


class DenseRetrieval(StrEnum):
    """Retrieval by meaning for a turn (stored as its value in the turn's record)."""

    #: The policy does not ask for it (or nothing was retrieved).
    OFF = "off"
    ON = "on"
    #: Asked for, but the embeddings requirements are missing or the model failed to load:
    #: full-text only.
    UNAVAILABLE = "unavailable"


def dense_enabled(policy: ContextPolicy) -> bool:
    """Whether ``policy`` asks for dense retrieval (whatever is installed)."""
    return (
        bool(getattr(policy, "retrieval_dense", False))
        and strategy_for(policy.strategy).needs.retrieval_by_meaning
    )


def dense_status(policy: ContextPolicy) -> DenseRetrieval:
    """Off (the policy does not ask for it), on, or unavailable (asked for, but the
    embeddings requirements are missing or the model failed to load: lexical only)."""
    if not dense_enabled(policy):
        return DenseRetrieval.OFF
    return DenseRetrieval.ON if embeddings.available() else DenseRetrieval.UNAVAILABLE


# --- writing -------------------------------------------------------------------------------


def embed_messages(tenant_id: int, rows: Sequence[Mapping[str, Any]]) -> int:
    """Store the vectors of ``rows`` (``id``, ``conversation_id``, ``seq``, ``content``) of one
    tenant; rows that already have one are left alone (one insert, conflicts ignored).
    Blank texts get a zero vector (never similar to anything) so they are not retried.
    Returns how many rows were embedded. Raises EmbeddingsUnavailable."""
    if not rows:
        return 0
    texts = [str(r["content"] or "") for r in rows]
    wanted = [i for i, t in enumerate(texts) if t.strip()]
    vectors = np.zeros((len(rows), embeddings.DIMENSIONS), dtype=np.float32)
    if wanted:
        vectors[wanted] = embeddings.embed([texts[i] for i in wanted])
    objects = [
        MessageEmbedding(
            tenant_id=tenant_id,
            conversation_id=row["conversation_id"],
            message_id=row["id"],
            seq=row["seq"],
            model=embeddings.MODEL_NAME,
            vector=embeddings.to_bytes(vector),
        )
        for row, vector in zip(rows, vectors, strict=True)
    ]
    with tenant_scope(tenant_id):
        MessageEmbedding.objects.bulk_create(objects, ignore_conflicts=True, batch_size=500)
    return len(objects)


def missing_messages(
    tenant_id: int, conversation_id: int, *, limit: int, last_seq: int | None = None
) -> list[Mapping[str, Any]]:
    """The newest (at most ``limit``) of the conversation's retrievable messages that have no
    vector of the current model, however old: one query (the message index walked newest
    first, each probed in the embeddings' unique index, stopping at ``limit``)."""
    with tenant_scope(tenant_id):
        if last_seq is None:
            found = Conversation.objects.filter(pk=conversation_id).values("last_seq").first()
            if found is None:
                return []
            last_seq = int(found["last_seq"])
        stored = MessageEmbedding.objects.filter(
            tenant_id=tenant_id,
            conversation_id=conversation_id,
            model=embeddings.MODEL_NAME,
            seq=OuterRef("seq"),
        )
        return list(
            Message.objects.filter(
                tenant_id=tenant_id,
                conversation_id=conversation_id,
                seq__lte=last_seq,
                role__in=RETRIEVABLE_ROLES,
            )
            .exclude(status__in=SKIPPED_STATUSES)
            .exclude(Exists(stored))
            .order_by("-seq")
            .values("id", "conversation_id", "seq", "content")[: max(0, limit)]
        )


@dataclass
class EmbedResult:
    #: "done", "more" (vectors or index left: run again), "busy" (another run holds the
    #: conversation: run again later), "off" (policy), "unavailable", "missing" (no
    #: conversation).
    status: str
    embedded: int = 0
    #: What the run did to the conversation's index (``vector_index.IndexResult.status``).
    index: str = ""

    @property
    def more(self) -> bool:
        return self.status == "more"

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "embedded": self.embedded, "index": self.index}


def embed_conversation(
    tenant_id: int, conversation_id: int, *, limit: int = EMBED_BATCH, check_policy: bool = True
) -> EmbedResult:
    """Embed up to ``limit`` of the conversation's newest messages that lack a vector; once
    none lacks one, bring its nearest-neighbour index up to date
    (:func:`vector_index.index_update`, bounded too). Idempotent; one run per conversation at
    a time. ``status == "more"`` when vectors or index work remain (the task runs again)."""
    if not embeddings.available():
        return EmbedResult("unavailable")
    with tenant_scope(tenant_id):
        conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None:
        return EmbedResult("missing")
    if check_policy:
        if not dense_enabled(policy_for(conversation)):
            return EmbedResult("off")
    with exclusive(f"embed:t{tenant_id}:c{conversation_id}", EMBED_LOCK_SECONDS) as acquired:
        if not acquired:
            return EmbedResult("busy")
        rows = missing_messages(
            tenant_id, conversation_id, limit=limit + 1, last_seq=conversation.last_seq
        )
        try:
            embedded = embed_messages(tenant_id, rows[:limit])
        except embeddings.EmbeddingsUnavailable:
            return EmbedResult("unavailable")
        if len(rows) > limit:  # the index waits until every message has its vector
            return EmbedResult("more", embedded)
        index = vector_index.index_update(
            tenant_id, conversation_id, message_count=conversation.message_count
        )
    return EmbedResult("more" if index.more else "done", embedded, index.status)


@dataclass
class BackfillBatch:
    #: ``(tenant_id, conversation_id)`` of dense-enabled conversations with messages to embed.
    due: list[tuple[int, int]] = field(default_factory=list)
    scanned: int = 0
    #: Where the next batch starts (``None``: the sweep is complete).
    next_after_id: int | None = None


def dense_conversations(*, after_id: int, batch_size: int) -> list[Mapping[str, Any]]:
    """The next ``batch_size`` unarchived conversations (by id, after ``after_id``), of every
    tenant, whose policy (their own, else their tenant's active one, else the Hybrid preset:
    ``policy_for``'s rule) uses dense retrieval. Cross-tenant maintenance: two queries."""
    with all_tenants():
        dense_ids = list(
            ContextPolicy.objects.filter(
                retrieval_dense=True,
                strategy__in=strategy_names(lambda s: s.needs.retrieval_by_meaning),
            ).values_list("pk", flat=True)
        )
        if not dense_ids:
            return []
        uses = Q(policy_id__in=dense_ids) | Q(
            policy__isnull=True, tenant__active_policy_id__in=dense_ids
        )
        if ContextPolicy.objects.filter(
            pk__in=dense_ids, tenant__isnull=True, name=DEFAULT_PRESET
        ).exists():
            uses |= Q(policy__isnull=True, tenant__active_policy__isnull=True)
        return list(
            Conversation.objects.filter(uses, pk__gt=after_id, archived_at__isnull=True)
            .order_by("pk")
            .values("pk", "tenant_id", "last_seq", "message_count")[:batch_size]
        )


def backfill_batch(*, after_id: int = 0, batch_size: int = BACKFILL_BATCH) -> BackfillBatch:
    """One batch of the beat sweep: dense-enabled conversations after ``after_id`` and,
    among them, those with messages left to embed or vectors waiting beyond their index
    (one or two queries each)."""
    conversations = dense_conversations(after_id=after_id, batch_size=batch_size)
    batch = BackfillBatch(scanned=len(conversations))
    for row in conversations:
        tenant_id, conversation_id = int(row["tenant_id"]), int(row["pk"])
        if missing_messages(
            tenant_id, conversation_id, limit=1, last_seq=int(row["last_seq"])
        ) or vector_index.index_due(tenant_id, conversation_id, int(row["message_count"])):
            batch.due.append((tenant_id, conversation_id))
    if len(conversations) >= batch_size:
        batch.next_after_id = int(conversations[-1]["pk"])
    return batch


# --- reading -------------------------------------------------------------------------------


def stored_vectors(
    conversation: Conversation, *, before_seq: int | None, window: int = WINDOW
) -> tuple[np.ndarray, np.ndarray]:
    """``(seqs, vectors)`` of the conversation's newest ``window`` embedded messages older
    than ``before_seq``: one query on the ``(tenant, conversation, model, seq)`` index."""
    with tenant_scope(conversation.tenant_id):
        rows = MessageEmbedding.objects.filter(
            tenant_id=conversation.tenant_id,
            conversation_id=conversation.pk,
            model=embeddings.MODEL_NAME,
        )
        if before_seq is not None:
            rows = rows.filter(seq__lt=before_seq)
        fetched = list(rows.order_by("-seq").values_list("seq", "vector")[: max(0, window)])
    seqs = np.fromiter((seq for seq, _ in fetched), dtype=np.int64, count=len(fetched))
    return seqs, embeddings.from_bytes([vector for _, vector in fetched])


#: Embeds questions off the calling thread, so the caller's full-text query runs meanwhile
#: (the model's forward pass and PostgreSQL each keep a core; :func:`embeddings.embed` runs one
#: pass at a time per process anyway). It never touches the database. One per process: a
#: forked child does not inherit the parent's thread, so it starts its own.
_question_pool: tuple[int, ThreadPoolExecutor] | None = None
_question_pool_lock = threading.Lock()


def _question_executor() -> ThreadPoolExecutor:
    global _question_pool
    pid = os.getpid()
    with _question_pool_lock:
        if _question_pool is None or _question_pool[0] != pid:
            _question_pool = (
                pid,
                ThreadPoolExecutor(max_workers=1, thread_name_prefix="question-embedding"),
            )
        return _question_pool[1]


def embed_question(text: str) -> np.ndarray | None:
    """The unit vector of ``text``; ``None`` when the embeddings are unavailable or the model
    failed (logged: a broken model must not fail the turn)."""
    try:
        return embeddings.embed_question(text)
    except embeddings.EmbeddingsUnavailable:
        return None
    except Exception:
        logger.exception("embedding the question failed; retrieval stays lexical")
        return None


def question_soon(text: str) -> Future[np.ndarray | None] | None:
    """Start :func:`embed_question` of ``text`` on the embedding thread and return its future
    (pass it to :func:`dense_scores`); ``None`` when the embeddings are unavailable."""
    if not embeddings.available():
        return None
    try:
        return _question_executor().submit(embed_question, text)
    except RuntimeError:  # the interpreter is shutting down: embed on the caller's thread
        return None


#: What the start-up embeds to load the model (any text does).
WARM_UP_TEXT = "How do I get started?"


def questions_warm_up() -> Future[np.ndarray | None] | None:
    """At a web process's start: when a policy in use retrieves by meaning and the embeddings
    are installed, start embedding a probe question on the question-embedding thread, which
    loads the model and its ONNX Runtime graph there (a few seconds, once per process)
    instead of inside the process's first user's turn. Returns without waiting (the
    future; ``None`` when nothing is warmed). One query, across tenants; never raises: what
    fails here is loaded by the first question, as before."""
    try:
        if not embeddings.available() or not _some_policy_dense():
            return None
    except Exception:
        logger.exception("could not tell whether a policy retrieves by meaning")
        return None
    return question_soon(WARM_UP_TEXT)


def _some_policy_dense() -> bool:
    """Whether a policy in use retrieves by meaning: a conversation's own, a tenant's active
    one, or the default preset where a tenant has none (``policy_for``'s rule). A preset or
    a policy nobody uses does not count: loading the model costs each web process seconds of
    CPU and hundreds of megabytes, and a policy switched on later loads it at its first
    question."""
    with all_tenants():
        used = Q(pk__in=Tenant.objects.filter(active_policy__isnull=False).values("active_policy"))
        used |= Q(pk__in=Conversation.objects.filter(policy__isnull=False).values("policy"))
        if Tenant.objects.filter(active_policy__isnull=True).exists():
            used |= Q(tenant__isnull=True, name=DEFAULT_PRESET)
        return ContextPolicy.objects.filter(
            used,
            retrieval_dense=True,
            strategy__in=strategy_names(lambda s: s.needs.retrieval_by_meaning),
        ).exists()


#: How long a turn waits for its question's embedding (normally ~10 ms; the model loading on
#: a cold process takes a few seconds) before it goes on with words only.
QUESTION_WAIT_SECONDS = 30.0


def _awaited(question: Future[np.ndarray | None]) -> np.ndarray | None:
    """The embedding ``question`` will hold, or ``None`` (retrieval stays lexical) when it is
    not there within :data:`QUESTION_WAIT_SECONDS`."""
    try:
        return question.result(timeout=QUESTION_WAIT_SECONDS)
    except TimeoutError:
        logger.warning(
            "the question's embedding took over %ss; retrieval stays lexical", QUESTION_WAIT_SECONDS
        )
        return None


def question_vector(
    text: str, question: Future[np.ndarray | None] | None = None
) -> np.ndarray | None:
    """The embedding of ``text``: the one ``question`` holds when the turn started it (see
    :func:`question_soon`), else computed here; ``None`` when unavailable."""
    return _awaited(question) if question is not None else embed_question(text)


def dense_scores(
    conversation: Conversation,
    text: str,
    *,
    before_seq: int | None,
    top_k: int,
    window: int = WINDOW,
    question: Future[np.ndarray | None] | None = None,
) -> dict[int, float] | None:
    """The ``top_k`` messages (seq → cosine) most similar in meaning to ``text`` among all
    the conversation's embedded ones older than ``before_seq``; ``None`` when embeddings are
    unavailable (the caller stays lexical). One embedding (``question``: the future of
    :func:`question_soon` for ``text``, started earlier), then: a conversation of at most
    ``window`` messages, or where the ``usearch`` package is missing, or whose index is not
    built yet, one query for its newest ``window`` vectors scored exactly; otherwise its index
    (:func:`vector_index.index_nearest`: two queries, plus one every few seconds to check
    the index's version)."""
    if top_k <= 0 or not embeddings.available():
        return None
    query = _awaited(question) if question is not None else embed_question(text)
    if query is None:
        return None
    if (
        conversation.message_count > min(window, vector_index.EXACT_LIMIT)
        and vector_index.enabled()
    ):
        try:
            near = vector_index.index_nearest(
                conversation, query, before_seq=before_seq, top_k=top_k, tail=window
            )
        except Exception:  # a broken index must not fail the turn: scan exactly
            logger.exception("the vector index failed; scanning the newest vectors")
            near = None
        if near is not None:
            return near
    seqs, vectors = stored_vectors(conversation, before_seq=before_seq, window=window)
    return embeddings.top_by_cosine(seqs, vectors, query, top_k)
