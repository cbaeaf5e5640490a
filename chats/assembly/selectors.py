"""Bounded, indexed reads that fetch assembly candidates. All take the tenant's conversation
and run inside its tenant scope; none loads a whole conversation.

Query plan of one turn: (1) recent history in ONE query: an index-only walk of
``(tenant, conversation, seq desc)`` summing ``token_count`` over at most
``recent_message_cap`` rows, joined to the contents of the rows that can fit; (2) current
summaries (bounded by kinds and ``max_summaries_in_context``); (3) the user's current facts
(at most ``max_facts_per_user``); (4) retrieval (its own bounded queries).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC
from typing import Any

from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from chatplatform.tenancy.scoping import tenant_scope
from chats.context.types import FactItem, MessageItem, SummaryItem
from chats.models import Conversation
from memory.models import UserFact
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
    """Items from rows of ``RECENT_WITHIN_BUDGET_SQL``'s columns; author labels are built once
    per author."""
    labels: dict[tuple[Any, Any, Any], str] = {}
    items = []
    for row in rows:
        names = (row[7], row[8], row[9])
        label = labels.get(names)
        if label is None:
            label = labels[names] = author_label(*names)
        items.append(_message_item(row, bot_name, label))
    return items


def _message_item(row: tuple[Any, ...], bot_name: str, label: str) -> MessageItem:
    (pk, seq, role, content, tokens, counter, created_at, _u, _f, _l, excerpt) = row
    if role not in ("user", "assistant", "tool"):
        role = "user"
    author = bot_name if role == "assistant" else label
    return MessageItem(
        id=pk,
        seq=seq,
        role=role,
        content=content,
        author=author,
        tokens=tokens,
        counted_by=counter or None,
        created_at=created_at,
        reply_to_excerpt=excerpt,
    )


RECENT_WITHIN_BUDGET_SQL = """
WITH walk AS (
    SELECT id, seq,
           row_number() OVER (ORDER BY seq DESC) AS position,
           sum(COALESCE(token_count, 0) + %(overhead)s)
               OVER (ORDER BY seq DESC ROWS UNBOUNDED PRECEDING)
           - (COALESCE(token_count, 0) + %(overhead)s) AS before_it
    FROM chats_message
    WHERE tenant_id = %(tenant)s AND conversation_id = %(conversation)s
      AND seq < %(before)s AND seq > %(after)s
    ORDER BY seq DESC
    LIMIT %(limit)s
)
SELECT m.id, m.seq, m.role, m.content, m.token_count, m.token_counter, m.created_at,
       u.username, u.first_name, u.last_name, SUBSTR(r.content, 1, %(excerpt)s)
FROM walk
JOIN chats_message m ON m.id = walk.id
LEFT JOIN auth_user u ON u.id = m.author_id
LEFT JOIN chats_message r ON r.id = m.reply_to_id
WHERE walk.position <= %(minimum)s OR walk.before_it <= %(ceiling)s
ORDER BY m.seq DESC
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

    The walk reads only ``(seq, token_count)`` from the covering unique index; contents are
    joined for the chosen rows only. A legacy row (no count) weighs 0 here and is estimated by
    the core. The tenant filter is explicit because this is raw SQL.
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
    if connection.vendor == "sqlite":
        rows = [(*row[:6], _parse_datetime(row[6]), *row[7:]) for row in rows]
    return _message_items(rows, bot_name)


def _parse_datetime(value: Any) -> Any:
    if isinstance(value, str):
        parsed = parse_datetime(value)
        if parsed is not None and timezone.is_naive(parsed):
            parsed = timezone.make_aware(parsed, UTC)
        return parsed
    return value


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


def current_facts(tenant_id: int, user_id: int | None, *, limit: int) -> list[FactItem]:
    """The user's current facts, newest first (at most ``limit``)."""
    if user_id is None:
        return []
    with tenant_scope(tenant_id):
        facts = UserFact.objects.filter(user_id=user_id, superseded_at__isnull=True).order_by(
            "-created_at"
        )[:limit]
        return [FactItem(id=f.pk, text=f.text, key=f.key) for f in facts]
