"""Retrieval of older messages relevant to a new message (the hybrid strategy).

* :mod:`.query` (pure): the multilingual search query built from the new message;
* :mod:`.search`: one bounded, indexed full-text query per backend (PostgreSQL ``tsvector``,
  SQLite FTS5), scoped to one tenant's conversation;
* :mod:`.rerank` (pure): BM25 over the candidates, speaker and time cues, neighbouring turns,
  and the fusion with retrieval by meaning;
* :mod:`.embeddings` (pure, optional packages): sentence embeddings (all-MiniLM-L6-v2);
* :mod:`.dense`: stored message embeddings, their background jobs, and the nearest messages
  by meaning (policies with ``retrieval_dense``);
* :mod:`.vector_index`: a long conversation's nearest-neighbour index, kept by the embedding
  job in the database and cached per process; :mod:`.ann` (pure, optional ``usearch``) is
  the adapter over the library;
* :mod:`.retriever`: the three bounded queries that turn a new message into
  ``RetrievedItem`` candidates for the assembly (``retrieve_for_assembly`` is the assembly
  service's default retriever);
* :mod:`.tasks`: the embedding jobs and their scheduling after a reply.

The LoCoMo recall evaluation (``manage.py eval_recall``) is in ``tooling.evaluation``.
"""

from __future__ import annotations

from .query import SearchQuery, Term, build_query
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
