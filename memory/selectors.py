"""Reads of user facts. Every selector takes the tenant and the user, runs in the tenant's
scope, and raises the same not-found for a missing fact and another user's (or tenant's).

Which facts a prompt may hold: a reply is read by every participant of its conversation, so
a conversation with more than one participant (a group chat) gets only the author's
*shareable* facts; a one-to-one conversation gets all of them (:func:`conversation_is_shared`;
the turn's assembly reads the same rule in its one query, ``chats.assembly.selectors``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.db import connection

from chatplatform.core.memory.kinds import MEMORY_KINDS
from chatplatform.db import in_array
from chatplatform.models.conversations import Conversation, Message, Participant
from chatplatform.tenancy.scoping import tenant_scope
from memory.models import FactEnd, UserFact

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
MAX_HISTORY = 200


def kinds_sent_in(section: str) -> list[str]:
    """The memory kinds (registry names) sent in the prompt section ``section``
    (``"instructions"``: standing instructions and preferences; ``"facts"``: facts), in the
    registry's order: how the pages, the API and the chat command group a user's memories."""
    return [k.name for k in MEMORY_KINDS.values() if k.section == section]


def _id(obj: Any) -> int:
    value = getattr(obj, "pk", obj)
    if not isinstance(value, int) or isinstance(value, bool):
        raise UserFact.DoesNotExist(f"not an id: {obj!r}")
    return value


@dataclass(frozen=True)
class FactPage:
    """One page of a user's current facts, newest first (the ``/memories`` command, the UI)."""

    items: list[UserFact]
    page: int
    page_size: int
    total: int

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.page_size))

    @property
    def has_next(self) -> bool:
        return self.page < self.pages

    @property
    def has_previous(self) -> bool:
        return self.page > 1


def facts_list(
    tenant: Any,
    user: Any,
    page: int = 1,
    page_size: int = DEFAULT_PAGE_SIZE,
    *,
    kinds: list[str] | None = None,
) -> FactPage:
    """The user's current memories, newest first, one page (page numbers start at 1; a page
    past the end is empty; ``page_size`` is clamped to 1-100); with ``kinds``, only those
    kinds. Two queries."""
    tenant_id, user_id = _id(tenant), _id(user)
    page_size = max(1, min(int(page_size), MAX_PAGE_SIZE))
    page = max(1, int(page))
    with tenant_scope(tenant_id):
        current = UserFact.objects.filter(user_id=user_id, superseded_at__isnull=True)
        if kinds is not None:
            current = current.filter(kind__in=kinds)
        total = current.count()
        start = (page - 1) * page_size
        items: list[UserFact] = []
        if start < total:  # a page past the end is not queried: its offset may overflow
            items = list(current.order_by("-created_at", "-pk")[start : start + page_size])
    return FactPage(items=items, page=page, page_size=page_size, total=total)


def facts_page(
    *,
    tenant_id: int,
    user_id: int,
    page: int = 1,
    page_size: int = DEFAULT_PAGE_SIZE,
    kinds: list[str] | None = None,
) -> tuple[list[UserFact], int]:
    """``(memories of the page, total current memories)`` (of ``kinds`` when given):
    :func:`facts_list` for the ``/memories`` chat command."""
    found = facts_list(tenant_id, user_id, page=page, page_size=page_size, kinds=kinds)
    return found.items, found.total


def current_facts(
    tenant: Any,
    user: Any,
    *,
    limit: int = MAX_PAGE_SIZE,
    shareable_only: bool = False,
    kinds: list[str] | None = None,
) -> list[UserFact]:
    """The user's current memories, newest first (at most ``limit``); with
    ``shareable_only``, only those their owner marked shareable; with ``kinds``, only those
    kinds."""
    tenant_id, user_id = _id(tenant), _id(user)
    with tenant_scope(tenant_id):
        facts = UserFact.objects.filter(user_id=user_id, superseded_at__isnull=True)
        if kinds is not None:
            facts = facts.filter(kind__in=kinds)
        if shareable_only:
            facts = facts.filter(shareable=True)
        return list(facts.order_by("-created_at", "-pk")[: max(0, limit)])


def messages_with_memories(tenant: Any, message_ids: list[int], kinds: list[str]) -> set[int]:
    """The ids among ``message_ids`` that a memory of ``kinds`` came from, current or not (a
    memory its owner replaced or deleted still counts: its message has given it once)."""
    if not message_ids:
        return set()
    with tenant_scope(_id(tenant)):
        found = UserFact.objects.filter(source_message_id__in=message_ids, kind__in=kinds)
        return set(found.values_list("source_message_id", flat=True))


#: How many times :func:`replaced_statements` follows a chain of values on from the messages
#: it was given (a value replaced twice reaches its latest in two steps).
STATEMENT_STEPS = 3


def replaced_statements(
    tenant: Any, conversation: Any, message_ids: list[int]
) -> list[tuple[int, int]]:
    """``(older, newer)`` message id pairs of ``conversation`` where a fact said in the older
    message was replaced by a value said in the newer one, for the chains of values that
    touch ``message_ids`` (followed :data:`STATEMENT_STEPS` steps): how retrieval brings the
    latest statement of a fact (and the earlier ones it changed) next to a message it found.
    One query on the facts' source index per step, usually one in all (most messages gave
    no fact); both messages of a pair are the conversation's own, so a pair shows nothing
    its reader could not already read."""
    tenant_id, conversation_id = _id(tenant), _id(conversation)
    pairs: set[tuple[int, int]] = set()
    seen: set[int] = set()
    wanted = set(message_ids)
    kinds = kinds_sent_in("facts")
    for _ in range(STATEMENT_STEPS):
        if not wanted:
            break
        seen |= wanted
        matches, ids = in_array(sorted(wanted))
        sql = _STATEMENTS_SQL.format(kinds=", ".join(["%s"] * len(kinds)), matches=matches)
        params: list[Any] = [
            tenant_id,
            FactEnd.REPLACED.value,
            *kinds,
            conversation_id,
            conversation_id,
        ]
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, ids, ids])
            found = {(int(a), int(b)) for a, b in cursor.fetchall() if a != b}
        pairs |= found
        wanted = {i for pair in found for i in pair} - seen
    return sorted(pairs)


#: One step of :func:`replaced_statements`: the replaced facts (of the kinds sent as facts)
#: whose message or whose successor's message is among the wanted ones, both messages of
#: the conversation. One statement whatever the number of messages (an array parameter).
_STATEMENTS_SQL = """
    SELECT f.source_message_id, n.source_message_id
    FROM memory_userfact f
    JOIN chats_message fm ON fm.id = f.source_message_id
    JOIN memory_userfact n ON n.id = f.superseded_by_id
    JOIN chats_message nm ON nm.id = n.source_message_id
    WHERE f.tenant_id = %s AND f.ended_reason = %s AND f.kind IN ({kinds})
      AND fm.conversation_id = %s AND nm.conversation_id = %s
      AND (f.source_message_id {matches} OR n.source_message_id {matches})
"""


def conversation_is_shared(tenant: Any, conversation: Any) -> bool:
    """Whether other people read the replies of ``conversation``: a group chat, or one with
    more than one participant. A missing conversation counts as shared (the safe answer)."""
    tenant_id, conversation_id = _id(tenant), _id(conversation)
    with tenant_scope(tenant_id):
        found = Conversation.objects.filter(pk=conversation_id).values_list("is_group", flat=True)
        is_group = next(iter(found), None)
        if is_group is None or is_group:
            return True
        return Participant.objects.filter(conversation_id=conversation_id).count() > 1


def message_is_shared(tenant: Any, message: Any) -> bool:
    """:func:`conversation_is_shared` of the conversation ``message`` belongs to."""
    tenant_id, message_id = _id(tenant), _id(message)
    with tenant_scope(tenant_id):
        found = Message.objects.filter(pk=message_id).values_list("conversation_id", flat=True)
        conversation_id = next(iter(found), None)
    return conversation_id is None or conversation_is_shared(tenant_id, conversation_id)


def fact_get(tenant: Any, user: Any, fact_id: Any) -> UserFact:
    """One fact of this user (current or not); UserFact.DoesNotExist otherwise."""
    tenant_id, user_id = _id(tenant), _id(user)
    with tenant_scope(tenant_id):
        return UserFact.objects.get(pk=fact_id, user_id=user_id)


def fact_history(
    tenant: Any,
    user: Any,
    *,
    key: str | None = None,
    fact_id: Any = None,
    limit: int = 50,
) -> list[UserFact]:
    """Earlier and current versions, newest first.

    With ``key``: every version of that key. With ``fact_id``: the chain of versions that
    fact belongs to (its key's versions, or for a keyless fact the ``superseded_by`` chain).
    With neither: the user's ended facts (replaced, evicted, deleted).
    """
    tenant_id, user_id = _id(tenant), _id(user)
    limit = max(1, min(limit, MAX_HISTORY))
    with tenant_scope(tenant_id):
        facts = UserFact.objects.filter(user_id=user_id)
        if fact_id is not None:
            fact = facts.get(pk=fact_id)
            if fact.key:
                key = fact.key
            else:
                return _keyless_chain(facts, fact, limit)
        if key is not None:
            return list(facts.filter(key=key).order_by("-created_at", "-pk")[:limit])
        return list(
            facts.filter(superseded_at__isnull=False).order_by("-superseded_at", "-pk")[:limit]
        )


def _keyless_chain(facts: Any, fact: UserFact, limit: int) -> list[UserFact]:
    chain = [fact]
    newer = fact
    while newer.superseded_by_id is not None and len(chain) < limit:
        found = facts.filter(pk=newer.superseded_by_id).first()
        if found is None:
            break
        chain.insert(0, found)
        newer = found
    older = fact
    while len(chain) < limit:
        found = facts.filter(superseded_by_id=older.pk).first()
        if found is None:
            break
        chain.append(found)
        older = found
    return chain
