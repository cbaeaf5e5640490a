"""Bounded, indexed reads that fetch assembly candidates. All take the tenant's conversation
and run inside its tenant scope; none loads a whole conversation.

Query plan of one turn: (1) ONE query for recent history and the user's current facts (at
most ``max_facts_per_user``): a walk of ``(tenant, conversation, seq desc)`` summing
``token_count`` over at most ``recent_message_cap`` rows finds the rows that can fit, which
are then read as one seq range; the facts ride along in the same round trip;
(2) current summaries (bounded by kinds and ``max_summaries_in_context``); (3) retrieval
(its own bounded queries).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from operator import attrgetter, itemgetter
from typing import Any, cast

from django.conf import settings
from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from chats.context.types import FactItem, MessageItem, SummaryItem
from chats.models import Conversation

REPLY_EXCERPT_CHARS = 120


def author_label(username: str | None, first: str | None, last: str | None) -> str:
    """Seed 004's label: ``Full Name (@username)``."""
    full_name = " ".join(p for p in (first, last) if p).strip()
    if username and full_name:
        return f"{full_name} (@{username})"
    if username:
        return f"@{username}"
    return full_name


def _message_items(
    rows: Iterable[tuple[Any, ...]], bot_name: str, fact_rows: list[tuple[Any, ...]]
) -> list[MessageItem]:
    """Items from rows of ``RECENT_WITHIN_BUDGET_SQL``'s columns (hundreds per turn: one
    positional construction each, author labels built once per author). Rows of
    ``CURRENT_FACTS_ROWS_SQL`` (no role) are appended to ``fact_rows`` instead."""
    # By username: unique, and every row of one result carries the same names with it (no
    # author: no username, no names, the empty label).
    labels: dict[str | None, str] = {}
    items: list[MessageItem] = []
    append = items.append
    for row in rows:
        pk, seq, role, content, tokens, counter, username, first, last, excerpt = row
        if role == "assistant":
            author = bot_name
        elif role is None:
            fact_rows.append(row)
            continue
        else:
            if role != "user" and role != "tool":
                role = "user"
            author = labels.get(username)  # type: ignore[assignment]
            if author is None:
                author = labels[username] = author_label(username, first, last)
        # (id, seq, role, content, author, tokens, counted_by, created_at, reply_to_excerpt,
        # tool_group): history turns carry no time, so created_at is not read.
        append(
            _new_item(
                (pk, seq, role, content, author, tokens, counter or None, None, excerpt, None)
            )
        )
    return items


#: ``MessageItem._make`` without its Python-level length check (each row gives all ten
#: fields): the named tuple built in one C call, hundreds of times per turn.
_new_item = cast(Callable[[tuple[Any, ...]], MessageItem], partial(tuple.__new__, MessageItem))


#: Two phases in one statement. The walk (the scalar subquery) reads only ``seq`` and
#: ``token_count`` from the ``(tenant, conversation, seq)`` unique index, which INCLUDEs
#: ``token_count`` (an index-only scan on PostgreSQL): the window numbers the newest rows and
#: sums the stored counts (plus the per-message overhead) of the newer ones, and the walk
#: returns the oldest seq that can fit. The rows that fit are always the newest run, so the
#: outer scan reads exactly them as a seq range, like a plain range fetch; the heap is never
#: read for rows that do not fit. Joining per chosen row costs more than it looks: the
#: reply excerpt is looked up only for the rows that quote one.
RECENT_WITHIN_BUDGET_SQL = """
SELECT m.id, m.seq, m.role, m.content, m.token_count, m.token_counter,
       u.username, u.first_name, u.last_name,
       CASE WHEN m.reply_to_id IS NOT NULL THEN (
           SELECT SUBSTR(r.content, 1, %(excerpt)s) FROM chats_message r
           WHERE r.id = m.reply_to_id AND r.tenant_id = m.tenant_id
       ) END
FROM chats_message m
LEFT JOIN auth_user u ON u.id = m.author_id
WHERE m.tenant_id = %(tenant)s AND m.conversation_id = %(conversation)s
  AND m.seq < %(before)s
  AND m.seq >= (
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
  )
"""

#: The user's current facts as rows of ``RECENT_WITHIN_BUDGET_SQL``'s shape, to be appended
#: with UNION ALL (one round trip instead of two): ``seq`` holds the fact's rank (1 = newest),
#: ``content`` its text, ``token_counter`` its key; ``role`` is NULL (history rows never
#: have a NULL role). By the partial index ``(tenant, user, created_at)``.
CURRENT_FACTS_ROWS_SQL = """
SELECT * FROM (
    SELECT id, row_number() OVER (ORDER BY created_at DESC, id DESC), CAST(NULL AS text),
           text, CAST(NULL AS integer), key, CAST(NULL AS text), CAST(NULL AS text),
           CAST(NULL AS text), CAST(NULL AS text)
    FROM memory_userfact
    WHERE tenant_id = %(tenant)s AND user_id = %(user)s AND superseded_at IS NULL
    ORDER BY created_at DESC, id DESC
    LIMIT %(facts)s
) f
"""

RECENT_AND_FACTS_SQL = f"{RECENT_WITHIN_BUDGET_SQL}UNION ALL{CURRENT_FACTS_ROWS_SQL}"


def recent_messages_and_facts(
    conversation: Conversation,
    *,
    user_id: int | None,
    max_facts: int,
    before_seq: int,
    after_seq: int,
    limit: int,
    ceiling: int,
    min_messages: int,
    overhead: int,
    bot_name: str,
) -> tuple[list[MessageItem], list[FactItem]]:
    """The turn's history candidates and the user's current facts, in ONE query.

    History: the newest messages (``after_seq < seq < before_seq``, at most ``limit``) that
    can fit: the ``min_messages`` newest, then every one whose newer neighbours' stored
    tokens (plus ``overhead`` each) stay within ``ceiling``; newest first. The walk reads at
    most ``limit`` entries of the ``(tenant, conversation, seq)`` index. A legacy row (no
    count) weighs 0 here and is estimated by the core. Items carry no ``created_at``
    (history turns show no time).

    Facts: ``user_id``'s current facts in the tenant, newest first, at most ``max_facts``
    (none when ``user_id`` is None or ``max_facts`` is 0).

    The tenant filters are explicit because this is raw SQL."""
    with_facts = user_id is not None and max_facts > 0
    with connection.cursor() as cursor:
        cursor.execute(
            RECENT_AND_FACTS_SQL if with_facts else RECENT_WITHIN_BUDGET_SQL,
            {
                "tenant": conversation.tenant_id,
                "conversation": conversation.pk,
                "before": before_seq,
                "after": after_seq,
                "limit": limit,
                "overhead": overhead,
                "minimum": min_messages,
                "ceiling": ceiling,
                "excerpt": REPLY_EXCERPT_CHARS,
                "user": user_id,
                "facts": max_facts,
            },
        )
        rows = cursor.fetchall()
    fact_rows: list[tuple[Any, ...]] = []
    items = _message_items(rows, bot_name, fact_rows)
    # Neither part of the statement promises an order: both are sorted here.
    items.sort(key=_seq, reverse=True)
    facts = [
        FactItem(id=pk, text=text, key=key)
        for pk, _rank, _, text, _, key, *_ in sorted(fact_rows, key=_second)
    ]
    return items, facts


_second = itemgetter(1)
_seq = attrgetter("seq")


#: Current summaries of a conversation in ONE query (instead of one per kind): the newest
#: ``rolling`` ones, the newest ``recent`` (7-day) and ``long`` (30-day) one, each part by
#: the ``(tenant, conversation, kind, -last_seq)`` index. ``part`` numbers the parts:
#: UNION ALL promises no order, so rows are ordered in Python.
CURRENT_SUMMARIES_SQL = """
SELECT * FROM (
    SELECT 0 AS part, id, kind, text, first_seq, last_seq, token_count, token_counter, created_at,
           period_start, period_end
    FROM summaries_summary
    WHERE tenant_id = %(tenant)s AND conversation_id = %(conversation)s AND kind = 'rolling'
      AND merged_into_id IS NULL AND superseded_at IS NULL
    ORDER BY last_seq DESC LIMIT %(rolling)s
) rolling
UNION ALL SELECT * FROM (
    SELECT 1 AS part, id, kind, text, first_seq, last_seq, token_count, token_counter, created_at,
           period_start, period_end
    FROM summaries_summary
    WHERE tenant_id = %(tenant)s AND conversation_id = %(conversation)s AND kind = 'recent'
      AND merged_into_id IS NULL AND superseded_at IS NULL
    ORDER BY created_at DESC LIMIT 1
) recent
UNION ALL SELECT * FROM (
    SELECT 2 AS part, id, kind, text, first_seq, last_seq, token_count, token_counter, created_at,
           period_start, period_end
    FROM summaries_summary
    WHERE tenant_id = %(tenant)s AND conversation_id = %(conversation)s AND kind = 'long'
      AND merged_into_id IS NULL AND superseded_at IS NULL
    ORDER BY created_at DESC LIMIT 1
) long_term
"""
#: The carried-over summary of the conversation this one continues (its newest current one).
CARRIED_SUMMARY_SQL = """
UNION ALL SELECT * FROM (
    SELECT 3 AS part, id, kind, text, first_seq, last_seq, token_count, token_counter, created_at,
           period_start, period_end
    FROM summaries_summary
    WHERE tenant_id = %(tenant)s AND conversation_id = %(continues)s
      AND merged_into_id IS NULL AND superseded_at IS NULL
    ORDER BY last_seq DESC, created_at DESC LIMIT 1
) carried
"""


def current_summaries(conversation: Conversation, *, max_rolling: int) -> list[SummaryItem]:
    """The newest ``max_rolling`` current rolling summaries (newest first), the current 7-day
    and 30-day summaries, and the carried-over summary of a continued conversation, in that
    order, in ONE query. The tenant filter is explicit because this is raw SQL."""
    carried = bool(conversation.continues_id and conversation.carry_over_summary)
    with connection.cursor() as cursor:
        cursor.execute(
            CURRENT_SUMMARIES_SQL + (CARRIED_SUMMARY_SQL if carried else ""),
            {
                "tenant": conversation.tenant_id,
                "conversation": conversation.pk,
                "continues": conversation.continues_id,
                "rolling": max(0, max_rolling),
            },
        )
        rows = cursor.fetchall()
    rows.sort(key=lambda row: (row[0], -row[4]))  # by part, rolling ones newest first
    items: list[SummaryItem] = []
    for row in rows:
        part, pk, kind, text, first_seq, last_seq, tokens, counter, created, start, end = row
        items.append(
            SummaryItem(
                id=pk,
                kind="carried" if part == 3 else kind,
                text=text,
                first_seq=first_seq,
                last_seq=last_seq,
                tokens=tokens,
                counted_by=counter,
                created_at=_datetime(created),
                first_at=_datetime(start),
                last_at=_datetime(end),
            )
        )
    return items


def _datetime(value: Any) -> datetime | None:
    """A datetime column read by raw SQL, as the ORM would give it: PostgreSQL returns aware
    datetimes; SQLite returns text or naive UTC datetimes (its declared column types do not
    survive a UNION)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is not None and settings.USE_TZ and timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return cast(datetime | None, value)
