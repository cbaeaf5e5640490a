"""Older messages relevant to a new message, as ``RetrievedItem`` candidates for the assembly.

:func:`retrieve_messages` runs at most three bounded queries, whatever the conversation's
length: the indexed search (:func:`~chats.retrieval.search.search_messages`), one fetch of the
candidates' rows, and one fetch of the turns around the best candidates. Ranking happens in
:mod:`chats.retrieval.rerank` (pure). The caller passes the conversation it already holds;
nothing else of the conversation is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from chatplatform.models import ContextPolicy
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly.selectors import author_label
from chats.context.types import MessageItem, RetrievedItem
from chats.models import Conversation, Message, Role, Status

from .query import SearchQuery, build_query
from .rerank import Candidate, RerankConfig, neighbor_seqs, propagate, ranked, score, to_retrieved
from .search import search_messages

#: Roles of messages retrieval may return (system prompts and the like stay out).
RETRIEVABLE_ROLES = (Role.USER, Role.ASSISTANT, Role.TOOL)
SKIPPED_STATUSES = (Status.STREAMING, Status.FAILED)


@dataclass(frozen=True, slots=True)
class RetrievalSettings:
    """How much one retrieval may fetch and how it ranks.

    ``candidates``: hits asked from the search (their rows are fetched and re-ranked);
    ``neighbor_hits``: best candidates whose surrounding turns are fetched
    (``rerank.neighbor_depth`` on each side); ``max_items``: RetrievedItems returned.
    """

    candidates: int = 300
    neighbor_hits: int = 40
    max_items: int = 200
    rerank: RerankConfig = field(default_factory=RerankConfig)


_FIELDS = (
    "id",
    "seq",
    "role",
    "content",
    "token_count",
    "token_counter",
    "created_at",
    "author_id",
    "author__username",
    "author__first_name",
    "author__last_name",
)


def _names(row: dict[str, Any]) -> list[str]:
    """The words a question may name the author by (first, last and user name)."""
    names = (row["author__first_name"], row["author__last_name"], row["author__username"])
    return [w for n in names if n for w in str(n).split()]


def _item(row: dict[str, Any], bot_name: str) -> MessageItem:
    """The pure view of a fetched row; labels as the recent-history selector makes them."""
    role = row["role"]
    if role == Role.ASSISTANT:
        author = bot_name
    else:
        author = author_label(
            row["author__username"], row["author__first_name"], row["author__last_name"]
        )
    return MessageItem(
        id=row["id"],
        seq=row["seq"],
        role=role,
        content=row["content"],
        author=author,
        tokens=row["token_count"],
        counted_by=row["token_counter"] or None,
        created_at=row["created_at"],
    )


def _fetch(conversation: Conversation, seqs: Iterable[int]) -> list[dict[str, Any]]:
    wanted = sorted(set(seqs))
    if not wanted:
        return []
    with tenant_scope(conversation.tenant_id):
        return list(
            Message.objects.filter(
                tenant_id=conversation.tenant_id,
                conversation_id=conversation.pk,
                seq__in=wanted,
                role__in=RETRIEVABLE_ROLES,
            )
            .exclude(status__in=SKIPPED_STATUSES)
            .values(*_FIELDS)
        )


def retrieve_messages(
    conversation: Conversation,
    text: str,
    *,
    before_seq: int | None = None,
    settings: RetrievalSettings | None = None,
    query: SearchQuery | None = None,
    bot_name: str = "Assistant",
) -> list[RetrievedItem]:
    """Messages of ``conversation`` (older than ``before_seq`` when given) relevant to
    ``text``, best first, at most ``settings.max_items``; each item carries the fetched
    turns around it as ``neighbors``. Empty when ``text`` has nothing searchable."""
    settings = settings or RetrievalSettings()
    config = settings.rerank
    query = query if query is not None else build_query(text)
    if query.is_empty or settings.max_items <= 0:
        return []
    hits = search_messages(
        tenant_id=conversation.tenant_id,
        conversation_id=conversation.pk,
        query=query,
        limit=settings.candidates,
        before_seq=before_seq,
    )
    if not hits:
        return []
    rows = {r["seq"]: r for r in _fetch(conversation, (h.seq for h in hits))}
    names = {r["author_id"]: _names(r) for r in rows.values() if r["author_id"] is not None}
    candidates = [_candidate(r) for r in rows.values()]
    total = max(conversation.message_count, conversation.last_seq, len(candidates))
    scored = score(query, candidates, total_docs=total, names=names, config=config)
    near = neighbor_seqs(scored, hits=settings.neighbor_hits, depth=config.neighbor_depth)
    if before_seq is not None:
        near = {seq for seq in near if seq < before_seq}
    neighbor_rows = {r["seq"]: r for r in _fetch(conversation, near)}
    propagate(scored, [_candidate(r) for r in neighbor_rows.values()], config)
    rows.update(neighbor_rows)
    items = {seq: _item(r, bot_name) for seq, r in rows.items()}
    return to_retrieved(
        ranked(scored), items, neighbors=config.neighbor_depth, max_items=settings.max_items
    )


def _candidate(row: dict[str, Any]) -> Candidate:
    return Candidate(row["id"], row["seq"], row["content"], row["author_id"])


def retrieve_for_assembly(
    conversation: Conversation, new_message: MessageItem, policy: ContextPolicy, before_seq: int
) -> list[RetrievedItem]:
    """The assembly service's retriever (``chats.assembly.service.Retriever``): candidates
    for ``new_message`` among messages with ``seq < before_seq``, at most the policy's
    ``retrieval_max_items``."""
    settings = RetrievalSettings(max_items=policy.retrieval_max_items)
    return retrieve_messages(
        conversation,
        new_message.content,
        before_seq=before_seq,
        settings=settings,
        bot_name=policy.bot_name,
    )
