"""Bounded, indexed reads that fetch assembly candidates. All take the tenant's conversation
and run inside its tenant scope; none loads a whole conversation.

Query plan of one turn: (1) recent history in ONE query: a walk of
``(tenant, conversation, seq desc)`` summing ``token_count`` over at most
``recent_message_cap`` rows, keeping the rows that can fit; (2) current
summaries (bounded by kinds and ``max_summaries_in_context``); (3) the user's current facts
(at most ``max_facts_per_user``); (4) retrieval (its own bounded queries).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection

from chatplatform.tenancy.scoping import tenant_scope
from chats.context.types import FactItem, MessageItem, SummaryItem
from chats.models import Conversation
from summaries.models import Summary

REPLY_EXCERPT_CHARS = 120


def author_label(username: str | None, first: str | None, last: str | None) -> str:
    """Seed 004's label: ``Full Name (@username)``."""
    full_name = " ".join(p for p in (first, last) if p).strip()
    if username and full_name:
        return f"{full_name} (@{username})"
    if username:
        return f"@{username}"
    return full_name


def _message_items(rows: Iterable[tuple[Any, ...]], bot_name: str) -> list[MessageItem]:
    """Items from rows of ``RECENT_WITHIN_BUDGET_SQL``'s columns (hundreds per turn: one
    positional construction each, author labels built once per author)."""
    labels: dict[tuple[Any, Any, Any], str] = {}
    items: list[MessageItem] = []
    append = items.append
    for pk, seq, role, content, tokens, counter, username, first, last, excerpt in rows:
        if role == "assistant":
            author = bot_name
        else:
            if role != "user" and role != "tool":
                role = "user"
            names = (username, first, last)
            author = labels.get(names)  # type: ignore[assignment]
            if author is None:
                author = labels[names] = author_label(username, first, last)
        # MessageItem(id, seq, role, content, author, tokens, counted_by, created_at,
        # reply_to_excerpt): history turns carry no time, so created_at is not read.
        append(MessageItem(pk, seq, role, content, author, tokens, counter or None, None, excerpt))
    return items


#: One pass over the newest rows by the ``(tenant, conversation, seq)`` unique index: the
#: window numbers them and sums ``token_count`` (plus the per-message overhead) of the newer
#: ones, the outer filter keeps those that can fit. The index does not hold ``id``, so the
#: walk reads the heap rows anyway; reading their other columns in the same pass is cheaper
#: than joining the table to itself by id for the chosen rows.
RECENT_WITHIN_BUDGET_SQL = """
SELECT w.id, w.seq, w.role, w.content, w.token_count, w.token_counter,
       u.username, u.first_name, u.last_name, SUBSTR(r.content, 1, %(excerpt)s)
FROM (
    SELECT id, seq, role, content, token_count, token_counter, author_id, reply_to_id,
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
LEFT JOIN auth_user u ON u.id = w.author_id
LEFT JOIN chats_message r ON r.id = w.reply_to_id
WHERE w.position <= %(minimum)s OR w.before_it <= %(ceiling)s
ORDER BY w.seq DESC
"""


def recent_messages_within(
    conversation: Conversation,
    *,
    before_seq: int,
    after_seq: int,
    limit: int,
    ceiling: int,
    min_messages: int,
    overhead: int,
    bot_name: str,
) -> list[MessageItem]:
    """The newest messages (``after_seq < seq < before_seq``, at most ``limit``) that can fit:
    the ``min_messages`` newest, then every one whose newer neighbours' stored tokens (plus
    ``overhead`` each) stay within ``ceiling``; newest first, in ONE query.

    The walk reads at most ``limit`` rows of the ``(tenant, conversation, seq)`` index, newest
    first. A legacy row (no count) weighs 0 here and is estimated by the core. Items carry no
    ``created_at`` (history turns show no time). The tenant filter is explicit because this
    is raw SQL.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            RECENT_WITHIN_BUDGET_SQL,
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
            },
        )
        rows = cursor.fetchall()
    return _message_items(rows, bot_name)


def current_summaries(conversation: Conversation, *, max_rolling: int) -> list[SummaryItem]:
    """The newest ``max_rolling`` current rolling summaries, the current 7-day and 30-day
    summaries, and the carried-over summary of a continued conversation."""
    items: list[SummaryItem] = []
    with tenant_scope(conversation.tenant_id):
        current = Summary.objects.filter(
            conversation_id=conversation.pk, merged_into__isnull=True, superseded_at__isnull=True
        )
        rolling = list(current.filter(kind="rolling").order_by("-last_seq")[:max_rolling])
        periodic = [
            s
            for kind in ("recent", "long")
            for s in current.filter(kind=kind).order_by("-created_at")[:1]
        ]
        carried: list[Summary] = []
        if conversation.continues_id and conversation.carry_over_summary:
            carried = list(
                Summary.objects.filter(
                    conversation_id=conversation.continues_id,
                    merged_into__isnull=True,
                    superseded_at__isnull=True,
                ).order_by("-last_seq", "-created_at")[:1]
            )
    for summary, kind in [
        *((s, s.kind) for s in rolling + periodic),
        *((s, "carried") for s in carried),
    ]:
        items.append(
            SummaryItem(
                id=summary.pk,
                kind=kind,  # type: ignore[arg-type]
                text=summary.text,
                first_seq=summary.first_seq,
                last_seq=summary.last_seq,
                tokens=summary.token_count,
                counted_by=summary.token_counter,
                created_at=summary.created_at,
                first_at=summary.period_start,
                last_at=summary.period_end,
            )
        )
    return items


#: The user's current facts by the partial index ``(tenant, user, created_at)``. Raw SQL: the
#: ORM spends several times the query's own time building it, on every turn.
CURRENT_FACTS_SQL = """
SELECT id, text, key FROM memory_userfact
WHERE tenant_id = %s AND user_id = %s AND superseded_at IS NULL
ORDER BY created_at DESC, id DESC
LIMIT %s
"""


def current_facts(tenant_id: int, user_id: int | None, *, limit: int) -> list[FactItem]:
    """The user's current facts in the tenant, newest first (at most ``limit``). The tenant
    filter is explicit because this is raw SQL."""
    if user_id is None or limit <= 0:
        return []
    with connection.cursor() as cursor:
        cursor.execute(CURRENT_FACTS_SQL, [tenant_id, user_id, limit])
        rows = cursor.fetchall()
    return [FactItem(id=pk, text=text, key=key) for pk, text, key in rows]
