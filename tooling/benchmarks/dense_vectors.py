"""Synthetic message vectors for benchmarking retrieval by meaning on long scratch
conversations (``bench_assembly --dense``).

Embedding 100,000 messages with MiniLM takes about an hour on two cores, so every message
gets a random unit vector instead (the hardest case for a nearest-neighbour graph: no
clusters), except one planted early in the conversation, whose vector is a near-duplicate of
the benchmark question's real embedding: the latency is that of real retrieval, and whether
the planted message comes back shows that retrieval reaches the whole conversation. The
conversation's index is then built by the embedding job's own function
(``chats.retrieval.vector_index.index_update``), run by run as the job would.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from django.db import connection, transaction

from chatplatform.models.conversations import Conversation, Message, MessageEmbedding
from chatplatform.tenancy.scoping import tenant_scope
from chats.retrieval import embeddings, vector_index

#: Where the planted message sits: this share of the way into the conversation.
PLANTED_AT = 0.005
#: Noise added to the question's vector for the planted one (cosine ~0.99 with it).
PLANTED_NOISE = 0.005


def planted_seq(size: int) -> int:
    return max(1, int(size * PLANTED_AT))


def plant_vectors(conversation: Conversation, question: str, seed: int = 11) -> dict[str, Any]:
    """Give every message of ``conversation`` a synthetic vector (once: kept when every
    message has one) and plant the question's near-duplicate at :func:`planted_seq`. Returns
    the planted message's id and seq and how long the vectors took."""
    tenant_id = conversation.tenant_id
    size = conversation.last_seq
    seq = planted_seq(size)
    started = time.perf_counter()
    with tenant_scope(tenant_id):
        planted_id = Message.objects.filter(conversation=conversation, seq=seq).values_list(
            "id", flat=True
        )[0]
        stored = MessageEmbedding.objects.filter(
            conversation=conversation, model=embeddings.MODEL_NAME
        ).count()
    if stored < size:
        rng = np.random.default_rng(seed)
        query = embeddings.embed([question])[0]
        with tenant_scope(tenant_id):
            MessageEmbedding.objects.filter(conversation=conversation).delete()
            ids = dict(Message.objects.filter(conversation=conversation).values_list("seq", "id"))
        chunk = 20_000
        for start in range(1, size + 1, chunk):
            seqs = range(start, min(size, start + chunk - 1) + 1)
            vectors = rng.standard_normal((len(seqs), embeddings.DIMENSIONS)).astype(np.float32)
            if seq in seqs:
                vectors[seq - start] = query + PLANTED_NOISE * vectors[seq - start]
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            _insert(
                conversation,
                [(s, ids[s], embeddings.to_bytes(v)) for s, v in zip(seqs, vectors, strict=True)],
            )
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE chats_messageembedding")
    return {
        "planted_id": planted_id,
        "planted_seq": seq,
        "vectors_s": round(time.perf_counter() - started, 1),
    }


def _insert(conversation: Conversation, rows: list[tuple[int, int, bytes]]) -> None:
    tenant_id, model = conversation.tenant_id, embeddings.MODEL_NAME
    if connection.vendor == "postgresql":
        columns = "tenant_id, conversation_id, message_id, seq, model, vector, created_at"
        with transaction.atomic(), connection.cursor() as cursor:
            now = time.strftime("%Y-%m-%d %H:%M:%S+00", time.gmtime())
            with cursor.cursor.copy(f"COPY chats_messageembedding ({columns}) FROM STDIN") as copy:
                for seq, message_id, blob in rows:
                    copy.write_row((tenant_id, conversation.pk, message_id, seq, model, blob, now))
        return
    with tenant_scope(tenant_id):
        MessageEmbedding.objects.bulk_create(
            [
                MessageEmbedding(
                    tenant_id=tenant_id,
                    conversation_id=conversation.pk,
                    message_id=message_id,
                    seq=seq,
                    model=model,
                    vector=blob,
                )
                for seq, message_id, blob in rows
            ],
            batch_size=2000,
        )


def build_index(conversation: Conversation) -> dict[str, Any]:
    """Run the embedding job's index step until it has nothing left (as the job's re-enqueued
    runs would); what it did and how long it took."""
    if not vector_index.enabled():
        return {"status": "unavailable (the usearch package is not installed): exact scan"}
    started = time.perf_counter()
    runs, last = 0, None
    while True:
        last = vector_index.index_update(
            conversation.tenant_id, conversation.pk, message_count=conversation.message_count
        )
        runs += 1
        if not last.more:
            break
    return {
        "status": last.status,
        "vectors": last.size,
        "runs": runs,
        "build_s": round(time.perf_counter() - started, 1),
        "synthetic_vectors": True,
    }
