"""Retrieval of older messages relevant to a new message (the hybrid strategy).

* :mod:`.query` (pure): the multilingual search query built from the new message;
* :mod:`.search`: one bounded, indexed full-text query per backend (PostgreSQL ``tsvector``,
  SQLite FTS5), scoped to one tenant's conversation;
* :mod:`.rerank` (pure): BM25 over the candidates, speaker and time cues, neighbouring turns,
  and the fusion with retrieval by meaning;
* :mod:`.embeddings` (pure, optional packages): sentence embeddings (all-MiniLM-L6-v2);
* :mod:`.dense`: stored message embeddings, their background jobs, and the nearest messages
  by meaning (policies with ``retrieval_dense``);
* :mod:`.retriever`: the three bounded queries that turn a new message into
  ``RetrievedItem`` candidates for the assembly (``retrieve_for_assembly`` is the assembly
  service's default retriever);
* :mod:`.locomo` (pure) and :mod:`.evaluation`: the LoCoMo recall evaluation
  (``manage.py eval_recall``).

Importing this package imports no models; the Django parts load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .query import SearchQuery, Term, build_query

if TYPE_CHECKING:
    from .retriever import RetrievalSettings, retrieve_for_assembly, retrieve_messages
    from .search import Hit, search_messages

__all__ = [
    "Hit",
    "RetrievalSettings",
    "SearchQuery",
    "Term",
    "build_query",
    "retrieve_for_assembly",
    "retrieve_messages",
    "search_messages",
]

_LAZY = {
    "Hit": "search",
    "search_messages": "search",
    "RetrievalSettings": "retriever",
    "retrieve_for_assembly": "retriever",
    "retrieve_messages": "retriever",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)
