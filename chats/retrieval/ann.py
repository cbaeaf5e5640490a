"""Approximate nearest neighbours over unit vectors (pure: nothing here imports Django).

The one adapter over the optional ``usearch`` package (``requirements/embeddings.txt``): an
HNSW graph by cosine, its vectors kept as 8-bit integers (~384 bytes each plus ~140 bytes of
graph for MiniLM), serialised to bytes and loaded back. Nothing else imports ``usearch``.

Why usearch (against faiss-cpu and hnswlib): maintained, with frequent releases (hnswlib's
last is from December 2023 and PyPI has no wheel of it for this platform: it builds from
source with a C++ compiler); 13 MB of wheels with its SIMD kernels (``numkong``) against
19 MB for faiss-cpu; an index saves to bytes and loads from bytes in one call, which is how it
is kept in a database column (faiss serialises through a numpy array, hnswlib only to a file
path); its keys are any 64-bit integers (the embeddings' ids), a loaded index takes more
vectors, and searches of one index from several threads at once are safe (a web process's
threads share the cached indexes, which are never modified once loaded).

:func:`available` says whether the package is installed; callers fall back to the exact scan
(``chats.retrieval.dense``) when it is not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

import numpy as np

#: Stored beside every serialised index (``MessageVectorIndex.engine``): a stored index of
#: another engine or layout is rebuilt, never loaded.
ENGINE = "usearch2-hnsw-cos-i8"
#: Graph links per node: usearch's default; recall ~0.99 at this size of vectors.
CONNECTIVITY = 16
#: Candidates kept while inserting (build quality) and while searching (recall).
EXPANSION_ADD = 128
EXPANSION_SEARCH = 128

_installed: bool | None = None


def available() -> bool:
    """Whether the ``usearch`` package is installed (checked once, without importing it)."""
    global _installed
    if _installed is None:
        try:
            _installed = find_spec("usearch") is not None
        except (ImportError, ValueError, AttributeError):
            _installed = False
    return _installed


class AnnUnavailable(RuntimeError):
    """The ``usearch`` package is not installed."""


def _index_class() -> Any:
    if not available():
        raise AnnUnavailable("the usearch package is not installed")
    from usearch.index import Index

    return Index


@dataclass
class AnnIndex:
    """One conversation's graph: search it, add to it, serialise it."""

    native: Any

    @classmethod
    def new(cls, dimensions: int) -> AnnIndex:
        index = _index_class()(
            ndim=dimensions,
            metric="cos",
            dtype="i8",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )
        return cls(index)

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> AnnIndex:
        """An index saved by :meth:`to_bytes` (copied: the buffer may be released after)."""
        index = _index_class().restore(bytes(data), view=False)
        if index is None:
            raise ValueError("not a serialised index")
        index.expansion_search = EXPANSION_SEARCH
        return cls(index)

    def to_bytes(self) -> bytes:
        return bytes(self.native.save())

    def __len__(self) -> int:
        return len(self.native)

    @property
    def nbytes(self) -> int:
        """Roughly what the index holds in memory (for the cache's bound)."""
        return int(self.native.memory_usage)

    def add(
        self, keys: Sequence[int] | np.ndarray, vectors: np.ndarray, *, threads: int = 1
    ) -> None:
        """Add unit ``vectors`` (one row per key) under ``keys`` (unique 64-bit integers)."""
        if len(keys) == 0:
            return
        self.native.add(
            np.asarray(keys, dtype=np.uint64),
            np.ascontiguousarray(vectors, dtype=np.float32),
            threads=threads,
        )

    def search(self, query: np.ndarray, count: int) -> list[int]:
        """Keys of (about) the ``count`` stored vectors closest to ``query``, nearest first."""
        if count <= 0 or len(self) == 0:
            return []
        matches = self.native.search(np.asarray(query, dtype=np.float32), min(count, len(self)))
        return [int(key) for key in matches.keys]
