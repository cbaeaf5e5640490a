"""The evaluations' vector cache: a text embedded once is read back from the file by the
next run, identical, and only new texts are computed."""

from __future__ import annotations

import numpy as np

from chats.retrieval import embeddings
from tooling.evaluation.vector_cache import cached_vectors


def test_a_second_run_reads_the_vectors_the_first_computed(tmp_path, monkeypatch):
    computed: list[str] = []

    def fake_embed(texts):
        computed.extend(texts)
        return np.array(
            [[len(t), i] + [0.0] * (embeddings.DIMENSIONS - 2) for i, t in enumerate(texts)],
            dtype=np.float32,
        )

    monkeypatch.setattr(embeddings, "embed", fake_embed)
    path = tmp_path / "vectors.sqlite3"
    with cached_vectors(path):
        first = embeddings.embed(["alpha", "beta"])
    assert computed == ["alpha", "beta"]
    assert embeddings.embed is fake_embed  # restored when the run ends

    with cached_vectors(path):
        again = embeddings.embed(["beta", "gamma", "alpha"])
    assert computed == ["alpha", "beta", "gamma"]  # only the new text was embedded
    assert np.array_equal(again[0], first[1]) and np.array_equal(again[2], first[0])

    with cached_vectors(None):
        embeddings.embed(["alpha"])
    assert computed[-1] == "alpha"  # no cache: embedded anew


def test_the_cache_answers_on_the_question_embedding_thread(tmp_path, monkeypatch):
    # The retriever embeds the question on a thread of its own: the cache must answer there
    # too (a SQLite connection is bound to the thread that opened it unless told otherwise).
    from chats.retrieval.dense import question_soon

    def fake_embed(texts):
        return np.ones((len(texts), embeddings.DIMENSIONS), dtype=np.float32)

    monkeypatch.setattr(embeddings, "embed", fake_embed)
    monkeypatch.setattr(embeddings, "available", lambda: True)
    with cached_vectors(tmp_path / "vectors.sqlite3"):
        first = embeddings.embed(["what about the dog?"])
        future = question_soon("what about the dog?")
        assert future is not None
        vector = future.result()
    assert vector is not None and np.array_equal(vector, first[0])
