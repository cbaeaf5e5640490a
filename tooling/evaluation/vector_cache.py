"""Vectors the evaluations computed before, kept on disk between runs.

Embedding dominates an evaluation's time on long conversations (a BEAM dev run embeds about
8,000 messages: some twenty minutes on two cores), and the same texts are embedded again by
every run of every strategy and budget. :func:`cached_vectors` makes the embeddings module
answer from a SQLite file for texts it has seen (keyed by the model and the text's SHA-256),
computing and storing only the new ones. Only the evaluations use it; the platform's own
jobs always embed.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from chats.retrieval import embeddings


def default_path() -> Path:
    """``$XDG_CACHE_HOME/chatplatform/eval-vectors.sqlite3`` (``~/.cache`` by default)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "chatplatform" / "eval-vectors.sqlite3"


def _key(text: str) -> str:
    return hashlib.sha256(f"{embeddings.MODEL_NAME}\0{text}".encode()).hexdigest()


class VectorCache:
    """Vectors by text in a SQLite file (float32, the model's dimensions). Usable from any
    thread, one call at a time (the retriever embeds questions on a thread of its own)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, v BLOB)")
        self._lock = threading.Lock()

    def embed(
        self, compute: Callable[[Sequence[str]], np.ndarray], texts: Sequence[str]
    ) -> np.ndarray:
        """``compute(texts)``'s result, computing only what the file does not hold."""
        with self._lock:
            return self._embed(compute, texts)

    def _embed(
        self, compute: Callable[[Sequence[str]], np.ndarray], texts: Sequence[str]
    ) -> np.ndarray:
        keys = [_key(t) for t in texts]
        found: dict[str, bytes] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            query = f"SELECT key, v FROM vectors WHERE key IN ({marks})"  # noqa: S608
            found.update(self.db.execute(query, chunk).fetchall())
        missing = [i for i, k in enumerate(keys) if k not in found]
        out = np.zeros((len(texts), embeddings.DIMENSIONS), dtype=np.float32)
        for i, k in enumerate(keys):
            if k in found:
                out[i] = np.frombuffer(found[k], dtype=np.float32)
        if missing:
            computed = compute([texts[i] for i in missing])
            out[missing] = computed
            rows = [
                (keys[i], vector.astype(np.float32).tobytes())
                for i, vector in zip(missing, computed, strict=True)
            ]
            self.db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
            self.db.commit()
        return out

    def close(self) -> None:
        self.db.close()


@contextmanager
def cached_vectors(path: Path | None) -> Iterator[VectorCache | None]:
    """While open, :func:`chats.retrieval.embeddings.embed` and
    :func:`~chats.retrieval.embeddings.embed_question` (the same vectors) answer from the
    file at ``path`` for the texts it holds; ``None``: no cache."""
    if path is None:
        yield None
        return
    cache = VectorCache(path)
    compute, question = embeddings.embed, embeddings.embed_question

    def one(texts: Sequence[str]) -> np.ndarray:
        return np.stack([question(t) for t in texts])

    def cached_question(text: str) -> np.ndarray:
        return cache.embed(one, [text])[0]

    embeddings.embed = lambda texts: cache.embed(compute, texts)  # type: ignore[assignment]
    embeddings.embed_question = cached_question
    try:
        yield cache
    finally:
        embeddings.embed = compute  # type: ignore[assignment]
        embeddings.embed_question = question  # type: ignore[assignment]
        cache.close()
