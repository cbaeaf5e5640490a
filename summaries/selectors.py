"""Reads of the summaries app: what summaries a conversation has and what each covers.

Every selector takes the conversation (which carries its tenant) and runs inside that
tenant's scope; the admin and the API use :func:`summaries_for`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Count, Max, Sum

from chatplatform.core.context.types import SummaryItem
from chatplatform.db import column_datetime, execute_prepared
from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope
from summaries.models import Summary, SummaryKind

MAX_LISTED = 500


@dataclass(frozen=True)
class SummarySource:
    """A summary a merged one replaced: which messages and dates it covers."""

    id: int
    level: int
    first_seq: int
    last_seq: int
    period_start: datetime | None
    period_end: datetime | None


@dataclass(frozen=True)
class SummaryInfo:
    """A summary with its source range and what it saved; a merged one (``level`` > 0) also
    with the summaries it replaced (``sources``, oldest first)."""

    id: int
    kind: str
    level: int
    first_seq: int
    last_seq: int
    first_message_id: int | None
    last_message_id: int | None
    period_start: datetime | None
    period_end: datetime | None
    token_count: int
    token_counter: str
    source_tokens: int
    model: str
    prompt_version: str
    cost_usd: Decimal
    created_at: datetime
    merged_into_id: int | None
    superseded_at: datetime | None
    replaced_ids: tuple[int, ...]
    text: str
    content: dict[str, Any]
    sources: tuple[SummarySource, ...] = ()

    @property
    def is_current(self) -> bool:
        return self.merged_into_id is None and self.superseded_at is None

    @property
    def messages_covered(self) -> int:
        return self.last_seq - self.first_seq + 1

    @property
    def compression_ratio(self) -> float:
        """Source tokens per summary token (how much the summary saves)."""
        return self.source_tokens / self.token_count if self.token_count else 0.0


def summaries_for(
    conversation: Conversation, *, include_history: bool = False, limit: int = MAX_LISTED
) -> list[SummaryInfo]:
    """The conversation's summaries (current only, unless ``include_history``), by kind and
    source range; each says which messages (and dates) it covers and which summaries it
    replaced (two queries)."""
    with tenant_scope(conversation.tenant_id):
        queryset = Summary.objects.filter(conversation_id=conversation.pk)
        if not include_history:
            queryset = queryset.filter(merged_into__isnull=True, superseded_at__isnull=True)
        rows = list(queryset.order_by("kind", "first_seq", "level", "-created_at")[:limit])
        replaced: dict[int, list[SummarySource]] = {}
        ids = [s.pk for s in rows]
        if ids:
            children = Summary.objects.filter(merged_into_id__in=ids).order_by("first_seq")
            for child in children.values(
                "pk", "merged_into_id", "level", "first_seq", "last_seq", "period_start",
                "period_end",
            ):  # fmt: skip
                replaced.setdefault(child["merged_into_id"], []).append(
                    SummarySource(
                        id=child["pk"],
                        level=child["level"],
                        first_seq=child["first_seq"],
                        last_seq=child["last_seq"],
                        period_start=child["period_start"],
                        period_end=child["period_end"],
                    )
                )
    return [
        SummaryInfo(
            id=s.pk,
            kind=s.kind,
            level=s.level,
            first_seq=s.first_seq,
            last_seq=s.last_seq,
            first_message_id=s.first_message_id,
            last_message_id=s.last_message_id,
            period_start=s.period_start,
            period_end=s.period_end,
            token_count=s.token_count,
            token_counter=s.token_counter,
            source_tokens=s.source_tokens,
            model=s.model,
            prompt_version=s.prompt_version,
            cost_usd=s.cost_usd,
            created_at=s.created_at,
            merged_into_id=s.merged_into_id,
            superseded_at=s.superseded_at,
            replaced_ids=tuple(sorted(c.id for c in replaced.get(s.pk, []))),
            text=s.text,
            content=s.content if isinstance(s.content, dict) else {},
            sources=tuple(replaced.get(s.pk, [])),
        )
        for s in rows
    ]


def summary_get(conversation: Conversation, summary_id: int) -> Summary:
    """One summary of this conversation; Summary.DoesNotExist for missing and forbidden."""
    with tenant_scope(conversation.tenant_id):
        return Summary.objects.get(pk=summary_id, conversation_id=conversation.pk)


@dataclass(frozen=True)
class RollingCoverage:
    covered_upto: int
    current: int
    source_tokens: int


def rolling_coverage(conversation: Conversation) -> RollingCoverage:
    """How far the current rolling summaries reach (one indexed aggregate)."""
    with tenant_scope(conversation.tenant_id):
        agg = Summary.objects.filter(
            conversation_id=conversation.pk,
            kind=SummaryKind.ROLLING,
            merged_into__isnull=True,
            superseded_at__isnull=True,
        ).aggregate(upto=Max("last_seq"), n=Count("pk"), src=Sum("source_tokens"))
    return RollingCoverage(
        covered_upto=agg["upto"] or 0, current=agg["n"] or 0, source_tokens=agg["src"] or 0
    )


def message_stamps(
    conversation: Conversation, *, first_seq: int, limit: int
) -> list[tuple[int, datetime]]:
    """``(seq, created_at)`` of at most ``limit`` messages from ``first_seq`` on, oldest
    first (one indexed range query): where the sessions after the summarised part break."""
    with tenant_scope(conversation.tenant_id):
        return list(
            Message.objects.filter(conversation_id=conversation.pk, seq__gte=first_seq)
            .order_by("seq")
            .values_list("seq", "created_at")[: max(0, limit)]
        )


def last_message_at(conversation: Conversation) -> datetime | None:
    """When the conversation's newest message was written (one lookup by its seq)."""
    with tenant_scope(conversation.tenant_id):
        return (
            Message.objects.filter(conversation_id=conversation.pk, seq__lte=conversation.last_seq)
            .order_by("-seq")
            .values_list("created_at", flat=True)
            .first()
        )


def latest_summary_seq(conversation: Conversation) -> int:
    """The highest message seq any current summary of the conversation covers (0: none)."""
    with tenant_scope(conversation.tenant_id):
        agg = Summary.objects.filter(
            conversation_id=conversation.pk, merged_into__isnull=True, superseded_at__isnull=True
        ).aggregate(upto=Max("last_seq"))
    return agg["upto"] or 0


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
        execute_prepared(
            cursor,
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
                created_at=column_datetime(created),
                first_at=column_datetime(start),
                last_at=column_datetime(end),
            )
        )
    return items


def latest_compaction(conversation: Conversation) -> tuple[SummaryItem, dict[str, Any]] | None:
    """The conversation's current compaction by the provider (server compaction): the summary
    the prompt accounts for, and the block to send back verbatim. One indexed query."""
    with tenant_scope(conversation.tenant_id):
        found = (
            Summary.objects.filter(
                conversation_id=conversation.pk,
                kind=SummaryKind.COMPACTION,
                merged_into__isnull=True,
                superseded_at__isnull=True,
            )
            .order_by("-last_seq")
            .first()
        )
    if found is None:
        return None
    item = SummaryItem(
        id=found.pk,
        kind="compaction",
        text=found.text,
        first_seq=found.first_seq,
        last_seq=found.last_seq,
        tokens=found.token_count,
        counted_by=found.token_counter,
        created_at=found.created_at,
    )
    return item, dict(found.content.get("block") or {})
