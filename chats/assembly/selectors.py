"""Bounded, indexed reads that fetch assembly candidates. All take the tenant's conversation
and run inside its tenant scope; none loads a whole conversation.

Query plan of one turn: (1) ONE query for recent history and the user's current facts (at
most ``max_facts_per_user``): the ``token_count`` of at most ``recent_message_cap`` entries
of ``(tenant, conversation, seq desc)`` find the rows that can fit (one sum when they all
do, else a walk), which are then read as one seq range; the facts ride along in the same
round trip; (2) current summaries (bounded by kinds and ``max_summaries_in_context``);
(3) retrieval (its own bounded queries). (1) and (2) are prepared once per connection when
parameters are bound server-side (``chatplatform.db.execute_prepared``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from functools import partial
from operator import eq, itemgetter
from typing import Any, cast

from django.db import connection

from chatplatform.core.context.formatting import person_label, tool_calls_text
from chatplatform.core.context.types import FactItem, MessageItem
from chatplatform.core.llm.tool_rounds import ToolTurn, tool_turn
from chatplatform.db import execute_prepared
from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope

REPLY_EXCERPT_CHARS = 120


def _labelled_rows(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Item rows of a group chat from rows of :func:`_recent_sql` with ``labels`` (the
    item's ten columns then the author's username, first and last name): people's author
    labels built once per author (by username: unique, and every row of one result carries
    the same names with it; no author: the empty label)."""
    labels: dict[str | None, str] = {}
    out: list[tuple[Any, ...]] = []
    append = out.append
    for row in rows:
        (
            pk,
            seq,
            role,
            content,
            author,
            tokens,
            counter,
            _,
            excerpt,
            group,
            username,
            first,
            last,
        ) = row
        if role != "assistant":
            author = labels.get(username)
            if author is None:
                author = labels[username] = person_label(username, first, last)
        append((pk, seq, role, content, author, tokens, counter, None, excerpt, group))
    return out


#: ``MessageItem._make`` without its Python-level length check (each row gives all ten
#: fields): the named tuple built in one C call.
_new_item = cast(Callable[[Iterable[Any]], MessageItem], partial(tuple.__new__, MessageItem))
_first = itemgetter(0)

#: Characters of message contents the item memo holds (about 8-32 MB of strings).
ITEM_MEMO_MAX_CHARS = 4_000_000


class ItemMemo:
    """History items this process read, by message id, reused when a row reads the same
    again (every field equal). Thread-safe; cleared when the contents it holds pass
    ``max_chars``.

    Why: consecutive turns of a conversation read almost the same rows, and a WebSocket
    keeps a conversation in one process. A reused item costs one comparison of its fields
    (a memcmp of the content) instead of a new object, and its strings are the ones earlier
    turns already hashed, so the core's lookups by text (its count memo) do not hash the
    contents again. An item is reused only when equal to the row in every field, so it is
    exactly what building it afresh would give (ids are unique across tenants, and the row
    is the whole item).
    """

    def __init__(self, max_chars: int = ITEM_MEMO_MAX_CHARS) -> None:
        self.max_chars = max_chars
        self._items: dict[Any, MessageItem] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def items(self, rows: list[tuple[Any, ...]]) -> list[MessageItem]:
        """The items of ``rows`` (each in :class:`MessageItem`'s columns), in order."""
        # Lock-free reads: a dict read is atomic, and a stale or missing entry only means a
        # new item (equality decides).
        items: list[Any] = list(map(self._items.get, map(_first, rows)))
        same = list(map(eq, items, rows))
        if False not in same:
            return items
        fresh: list[MessageItem] = []
        for index, equal in enumerate(same):
            if not equal:
                item = items[index] = _new_item(rows[index])
                fresh.append(item)
        with self._lock:
            chars = sum(len(item.content) for item in fresh)
            if self._chars + chars > self.max_chars:
                self._items, self._chars = {}, 0
            self._items.update(zip(map(_first, fresh), fresh, strict=True))
            self._chars += chars
        return items

    def clear(self) -> None:
        with self._lock:
            self._items, self._chars = {}, 0


#: The process's item memo (history reads only).
item_memo = ItemMemo()


#: Rows that can fit, in the columns (and order) of :class:`MessageItem`, so a row becomes
#: an item in one C call: the role as the core reads it (anything else is a user turn), the
#: author (the bot's name on assistant turns; people's labels, in a group chat, from the
#: names appended by ``{names}``), no counter as NULL, no time (history turns show none),
#: the quoted start of the message replied to, no tool group.
#:
#: The bound (the oldest seq that can fit) reads only ``seq`` and ``token_count`` from the
#: ``(tenant, conversation, seq)`` unique index, which INCLUDEs ``token_count`` (an
#: index-only scan on PostgreSQL), over the newest ``limit`` rows. When their stored counts
#: (plus the per-message overhead) add up to at most ``ceiling``, or they are at most
#: ``minimum`` rows, all of them fit and the bound is their oldest seq: one aggregate. Only
#: otherwise does the walk (the scalar subquery in ELSE, evaluated only then) number the
#: rows and sum the counts of the newer ones, returning the oldest seq that can fit. Both
#: give the same seq: a row fits when it is among the ``minimum`` newest or the rows newer
#: than it cost at most ``ceiling``, and counts are never negative.
#:
#: The rows that fit are always the newest run, so the outer scan reads exactly them as a
#: seq range, like a plain range fetch; the heap is never read for rows that do not fit.
#: Joining per chosen row costs more than it looks: the reply excerpt is looked up only for
#: the rows that quote one, and the users table is joined only when labels are shown.
_RECENT_SQL = """
SELECT m.id, m.seq, CASE WHEN m.role IN ('assistant', 'tool') THEN m.role ELSE 'user' END,
       m.content, CASE WHEN m.role = 'assistant' THEN %(bot)s ELSE '' END,
       m.token_count, NULLIF(m.token_counter, ''), CAST(NULL AS text),
       CASE WHEN m.reply_to_id IS NOT NULL THEN (
           SELECT SUBSTR(r.content, 1, {excerpt}) FROM chats_message r
           WHERE r.id = m.reply_to_id AND r.tenant_id = m.tenant_id
       ) END,
       m.tool_group{names}
FROM chats_message m{join}
WHERE m.tenant_id = %(tenant)s AND m.conversation_id = %(conversation)s
  AND m.seq < %(before)s
  AND m.seq >= (
    SELECT CASE
        WHEN count(*) <= %(minimum)s OR sum(n.cost) <= %(ceiling)s THEN min(n.seq)
        ELSE (
            SELECT min(w.seq) FROM (
                SELECT seq,
                       row_number() OVER newest AS position,
                       sum(COALESCE(token_count, 0) + %(overhead)s) OVER newest
                       - (COALESCE(token_count, 0) + %(overhead)s) AS before_it
                FROM chats_message
                WHERE tenant_id = %(tenant)s AND conversation_id = %(conversation)s
                  AND seq < %(before)s AND seq > %(after)s
                WINDOW newest AS (ORDER BY seq DESC ROWS UNBOUNDED PRECEDING)
                ORDER BY seq DESC
                LIMIT %(limit)s
            ) w
            WHERE w.position <= %(minimum)s OR w.before_it <= %(ceiling)s
        ) END
    FROM (
        SELECT seq, COALESCE(token_count, 0) + %(overhead)s AS cost
        FROM chats_message
        WHERE tenant_id = %(tenant)s AND conversation_id = %(conversation)s
          AND seq < %(before)s AND seq > %(after)s
        ORDER BY seq DESC
        LIMIT %(limit)s
    ) n
  )
"""

#: The user's current memories (facts, standing instructions and preferences) as rows of the
#: history rows' shape, appended with UNION ALL (one round trip instead of two): ``seq``
#: holds minus the memory's rank (-1 = newest; history seqs are positive, so sorting the rows
#: by seq puts the memories last, newest first), the role column its kind, ``content`` its
#: text, ``author`` its key, then the value it replaced (a change in the world, not an edit)
#: and since when it holds (``valid_from`` as text: its first ten characters are the date on
#: every database). At most ``facts`` facts and ``instructions`` of the other kinds,
#: the newest, by the partial index ``(tenant, user, created_at)``. ``{private}`` keeps a
#: private memory out of a reply others read (see :data:`_SHAREABLE_ONLY` and
#: :data:`_PRIVATE_WHEN_ALONE`).
_FACTS_SQL = """
SELECT * FROM (
    SELECT id, -row_number() OVER (ORDER BY created_at DESC, id DESC), kind,
           text, key, CAST(NULL AS integer), CAST(NULL AS text),
           (SELECT p.text FROM memory_userfact p
            WHERE p.tenant_id = %(tenant)s AND p.superseded_by_id = ranked.id
              AND p.valid_until IS NOT NULL
            ORDER BY p.superseded_at DESC LIMIT 1),
           CAST(valid_from AS text), CAST(NULL AS text){names}
    FROM (
        SELECT id, created_at, kind, text, key, valid_from,
               row_number() OVER (
                   PARTITION BY kind = 'fact' ORDER BY created_at DESC, id DESC
               ) AS rank_in_kind
        FROM memory_userfact
        WHERE tenant_id = %(tenant)s AND user_id = %(user)s AND superseded_at IS NULL{private}
    ) ranked
    WHERE rank_in_kind <= CASE WHEN kind = 'fact' THEN %(facts)s ELSE %(instructions)s END
    ORDER BY created_at DESC, id DESC
) f
"""
#: A group chat: every member reads the reply, so only the facts their owner marked
#: shareable (``memory.selectors`` states the rule).
_SHAREABLE_ONLY = "\n      AND shareable"
#: Any other conversation: private facts too, unless someone else takes part in it (the
#: participant index ``(tenant, conversation, user)``; the same round trip).
_PRIVATE_WHEN_ALONE = """
      AND (shareable OR NOT EXISTS (
          SELECT 1 FROM chats_participant p
          WHERE p.tenant_id = %(tenant)s AND p.conversation_id = %(conversation)s
            AND p.user_id <> %(user)s
      ))"""

_NAMES = ", u.username, u.first_name, u.last_name"
_NO_NAMES = ", CAST(NULL AS text), CAST(NULL AS text), CAST(NULL AS text)"
_JOIN = "\nLEFT JOIN auth_user u ON u.id = m.author_id"


def _recent_sql(*, labels: bool, facts: bool, shared: bool = False) -> str:
    """The statement of :func:`recent_messages_and_facts`: history rows (with the authors'
    names appended when ``labels``), then the facts when ``facts`` (only shareable ones when
    ``shared``)."""
    recent = _RECENT_SQL.format(
        names=_NAMES if labels else "",
        join=_JOIN if labels else "",
        excerpt=int(REPLY_EXCERPT_CHARS),  # a constant: no parameter whose type could vary
    )
    if not facts:
        return recent
    facts_sql = _FACTS_SQL.format(
        names=_NO_NAMES if labels else "",
        private=_SHAREABLE_ONLY if shared else _PRIVATE_WHEN_ALONE,
    )
    return f"{recent}UNION ALL{facts_sql}"


#: Built once: ``(labels, facts, shared)`` -> the statement.
RECENT_SQL = {
    (labels, facts, shared): _recent_sql(labels=labels, facts=facts, shared=shared)
    for labels in (False, True)
    for facts in (False, True)
    for shared in (False, True)
}


def recent_messages_and_facts(
    conversation: Conversation,
    *,
    user_id: int | None,
    max_facts: int,
    max_instructions: int = 0,
    before_seq: int,
    after_seq: int,
    limit: int,
    ceiling: int,
    min_messages: int,
    overhead: int,
    bot_name: str,
    labels: bool = True,
    shared: bool = False,
) -> tuple[list[MessageItem], list[FactItem]]:
    """The turn's history candidates and the user's current facts, in ONE query.

    History: the newest messages (``after_seq < seq < before_seq``, at most ``limit``) that
    can fit: the ``min_messages`` newest, then every one whose newer neighbours' stored
    tokens (plus ``overhead`` each) stay within ``ceiling``; newest first. The query reads
    at most ``limit`` entries of the ``(tenant, conversation, seq)`` index (twice when not
    all of them fit). A legacy row (no count) weighs 0 here and is estimated by the core.
    Items carry no ``created_at`` (history turns show no time); assistant turns carry
    ``bot_name`` as their author, and people's turns their label (``Full Name
    (@username)``) when ``labels``, else the empty author: a private chat's turns show no
    speaker, so its read skips the users table.

    Memories: ``user_id``'s current facts in the tenant, newest first, at most ``max_facts``,
    and their standing instructions and preferences, at most ``max_instructions`` (none when
    ``user_id`` is None). A reply others read holds only the memories their owner marked
    shareable: in a group chat (``shared``) and in any conversation
    someone else takes part in; private facts go only into the owner's one-to-one
    conversations.

    The tenant filters are explicit because this is raw SQL."""
    with_facts = user_id is not None and max_facts + max_instructions > 0
    with connection.cursor() as cursor:
        execute_prepared(
            cursor,
            RECENT_SQL[labels, with_facts, shared],
            {
                "tenant": conversation.tenant_id,
                "conversation": conversation.pk,
                "before": before_seq,
                "after": after_seq,
                "limit": limit,
                "overhead": overhead,
                "minimum": min_messages,
                "ceiling": ceiling,
                "bot": bot_name,
                "user": user_id,
                "facts": max_facts,
                "instructions": max_instructions,
            },
        )
        rows = cursor.fetchall()
    # Neither part of the statement promises an order: newest first, then the facts
    # (negative seqs), newest first too.
    rows.sort(key=_second, reverse=True)
    split = len(rows)
    while split and rows[split - 1][1] < 0:
        split -= 1
    facts = [
        FactItem(
            id=row[0],
            text=row[3],
            key=row[4],
            kind=row[2],
            previous=row[7],
            since=row[8][:10] if row[7] and row[8] else None,
        )
        for row in rows[split:]
    ]
    del rows[split:]
    if labels:
        rows = _labelled_rows(rows)
    if any(map(_tool_group, rows)):
        rows = _with_tool_calls(conversation.tenant_id, rows)
    return item_memo.items(rows), facts


_tool_group = itemgetter(9)


def _with_tool_calls(tenant_id: int, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Item rows with the contents of replies that called tools as the prompt counts and
    reads them: their text, then their calls (``tool_calls_text``)."""
    ids = [row[0] for row in rows if row[9] is not None and row[2] == "assistant"]
    with tenant_scope(tenant_id):
        calls = dict(Message.objects.filter(pk__in=ids).values_list("pk", "tool_calls"))
    return [
        (*row[:3], tool_calls_text(row[3], calls[row[0]] or ()), *row[4:])
        if calls.get(row[0])
        else row
        for row in rows
    ]


_second = itemgetter(1)


#: Current summaries of a conversation in ONE query (instead of one per kind): the newest
#: ``rolling`` ones, the newest ``recent`` (7-day) and ``long`` (30-day) one, each part by
#: the ``(tenant, conversation, kind, -last_seq)`` index. ``part`` numbers the parts:
#: UNION ALL promises no order, so rows are ordered in Python.


def tool_turns(tenant_id: Any, ids: list[Any]) -> dict[Any, ToolTurn]:
    """The tool rounds' parts of the tenant's messages ``ids`` (a reply's calls, their
    results), by id; messages of no round are left out."""
    with tenant_scope(tenant_id):
        rows = Message.objects.filter(pk__in=ids, tool_group__isnull=False).values_list(
            "pk", "content", "tool_calls", "tool_results"
        )
    turns = {pk: tool_turn(content, calls, results) for pk, content, calls, results in rows}
    return {pk: turn for pk, turn in turns.items() if turn is not None}
