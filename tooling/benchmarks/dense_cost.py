"""Per-turn cost of retrieval by meaning on one long conversation (everything rolled back).

Stores ``--messages`` messages of random words with random unit vectors in a scratch tenant
of the configured database, then times the question's embedding, the read of the stored
vectors, the dot products, and ``retrieve_messages`` with and without dense retrieval.

    DATABASE_URL=... .venv/bin/python tooling/benchmarks/dense_cost.py [--messages 5000] [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DEBUG", "1")


class _Rollback(Exception):
    pass


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def run(messages: int, runs: int) -> str:
    from django.db import connection

    from chatplatform.models.conversations import Conversation, Message, MessageEmbedding
    from chatplatform.services import tenant_create
    from chatplatform.tenancy.scoping import tenant_scope
    from chats.retrieval import embeddings
    from chats.retrieval.dense import stored_vectors
    from chats.retrieval.retriever import RetrievalSettings, retrieve_messages
    from chats.services import conversation_create

    rng = np.random.default_rng(0)
    vocab = ["".join(chr(97 + int(x)) for x in rng.integers(0, 26, 6)) for _ in range(3000)]
    tenant = tenant_create(name="dense cost (scratch)", slug="dense-cost-scratch")
    conversation = conversation_create(tenant=tenant, created_by=tenant.service_user)
    with tenant_scope(tenant):
        Message.objects.bulk_create(
            [
                Message(
                    tenant=tenant,
                    conversation=conversation,
                    seq=seq,
                    role="user",
                    content=" ".join(vocab[j] for j in rng.integers(0, len(vocab), 14)),
                    token_count=20,
                    token_counter="o200k_base",  # noqa: S106
                )
                for seq in range(1, messages + 1)
            ],
            batch_size=1000,
        )
        Conversation.objects.filter(pk=conversation.pk).update(
            last_seq=messages, message_count=messages
        )
        ids = dict(Message.objects.filter(conversation=conversation).values_list("seq", "id"))
        vectors = rng.standard_normal((messages, embeddings.DIMENSIONS)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        MessageEmbedding.objects.bulk_create(
            [
                MessageEmbedding(
                    tenant=tenant,
                    conversation=conversation,
                    message_id=ids[seq],
                    seq=seq,
                    model=embeddings.MODEL_NAME,
                    vector=embeddings.to_bytes(vectors[seq - 1]),
                )
                for seq in range(1, messages + 1)
            ],
            batch_size=1000,
        )
        conversation = Conversation.objects.get(pk=conversation.pk)
    embeddings.embed(["warm up"])
    embed: list[float] = []
    fetch: list[float] = []
    score: list[float] = []
    lexical: list[float] = []
    dense: list[float] = []
    for i in range(runs):
        question = f"what about {vocab[i]} and {vocab[i + 50]}?"
        started = time.perf_counter()
        vector = embeddings.embed([question])[0]
        embed.append(_ms(started))
        started = time.perf_counter()
        seqs, stored = stored_vectors(conversation, before_seq=messages + 1)
        fetch.append(_ms(started))
        started = time.perf_counter()
        embeddings.top_by_cosine(seqs, stored, vector, 100)
        score.append(_ms(started))
        for settings, times in (
            (RetrievalSettings(), lexical),
            (RetrievalSettings(dense=True), dense),
        ):
            started = time.perf_counter()
            retrieve_messages(conversation, question, before_seq=messages + 1, settings=settings)
            times.append(_ms(started))
    med = statistics.median
    return (
        f"{connection.vendor}, {messages} messages (medians of {runs}): question embedding "
        f"{med(embed):.1f} ms, vector read {med(fetch):.1f} ms, dot products + top 100 "
        f"{med(score):.2f} ms; retrieve_messages full-text {med(lexical):.1f} ms, "
        f"with meaning {med(dense):.1f} ms"
    )


def main() -> None:
    import django

    django.setup()
    from django.db import transaction

    from chats.retrieval import embeddings

    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    if not embeddings.available():
        raise SystemExit("the embeddings requirements are not installed")
    line = ""
    try:
        with transaction.atomic():
            line = run(args.messages, args.runs)
            raise _Rollback
    except _Rollback:
        pass
    print(line)


if __name__ == "__main__":
    main()
