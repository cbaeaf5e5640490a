"""Periodic summaries: a 7-day "recent" and a 30-day "long" summary per active
conversation, each rebuilt at its policy's interval (3 and 14 days by default, 1,024 and 4,096
tokens) and replacing its predecessor (``superseded_at``).

A conversation is active for a kind when it has messages inside that kind's window. A
summary whose window has gone quiet is superseded without a successor (it no longer describes
"the last 7 days"). When the window still holds exactly the messages the current summary
covers, the summary is kept and its period moved forward instead of being rebuilt.

The beat task checks conversations in bounded batches by id (:func:`periodic_due_batch`):
one query for the batch with the time of each conversation's last message (an index lookup on
``(tenant, conversation, seq)``), one for the policies, one for the current summaries; it
dispatches a task per due conversation.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from chatplatform.core.context.strategies import strategy_for
from chatplatform.locks import exclusive
from chatplatform.models import ContextPolicy, Tenant
from chatplatform.models.conversations import Conversation, Message
from chatplatform.policies import DEFAULT_PRESET, policy_for
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from summaries.models import Summary, SummaryKind
from summaries.summarizer import Summarizer, SummaryFailed
from summaries.summarizer.engine import summarizer_for

from .storage import Result, counter_for, create_summary, fetch_messages, load_conversation
from .storage import lock_conversation as _lock

logger = logging.getLogger(__name__)

PERIODIC_KINDS: tuple[str, ...] = (SummaryKind.RECENT, SummaryKind.LONG)
#: At most this many of the newest messages of the window are read (bounded work).
MAX_SOURCE_MESSAGES: dict[str, int] = {SummaryKind.RECENT: 1500, SummaryKind.LONG: 4000}
#: Beat checks hourly: a summary due within this slack is refreshed now, not an hour late.
DUE_SLACK = timedelta(minutes=10)
#: A continued conversation quiet for this long gets its carry-over summary.
CONTINUATION_QUIET = timedelta(hours=1)
LOCK_SECONDS = settings.JOB_LOCK_SECONDS  # outlives the task's hard time limit


@dataclass(frozen=True)
class PeriodicSettings:
    days: int
    interval_days: int
    tokens: int


def periodic_settings(policy: ContextPolicy, kind: str) -> PeriodicSettings:
    if kind == SummaryKind.RECENT:
        return PeriodicSettings(
            policy.recent_summary_days,
            policy.recent_summary_interval_days,
            policy.recent_summary_tokens,
        )
    return PeriodicSettings(
        policy.long_summary_days, policy.long_summary_interval_days, policy.long_summary_tokens
    )


def periodic_enabled(policy: ContextPolicy) -> bool:
    return (
        policy.periodic_summaries_enabled
        and strategy_for(policy.strategy).needs.periodic_summaries
        and policy.summaries_budget > 0
    )


def is_due(period_end: datetime | None, interval_days: int, now: datetime) -> bool:
    return period_end is None or period_end <= now - timedelta(days=interval_days) + DUE_SLACK


@dataclass
class PeriodicResult(Result):
    kinds: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {**super().as_dict(), "kinds": self.kinds}


def periodic_summary_refresh(
    tenant_id: int,
    conversation_id: int,
    *,
    kinds: Iterable[str] = PERIODIC_KINDS,
    now: datetime | None = None,
    summarizer: Summarizer | None = None,
) -> PeriodicResult:
    """Refresh the conversation's periodic summaries that are due at ``now``."""
    conversation = load_conversation(tenant_id, conversation_id)
    if conversation is None:
        return PeriodicResult(status="not_found")
    policy = policy_for(conversation)
    if not periodic_enabled(policy):
        return PeriodicResult(status="disabled")
    now = now or timezone.now()
    result = PeriodicResult(status="ok")
    with exclusive(
        f"periodic:t{conversation.tenant_id}:c{conversation.pk}", LOCK_SECONDS
    ) as acquired:
        if not acquired:
            return PeriodicResult(status="locked")
        engine = summarizer
        for kind in kinds:
            if kind not in PERIODIC_KINDS:
                continue
            if engine is None:
                engine = summarizer_for(policy)
            result.kinds[kind] = _refresh_kind(conversation, policy, engine, kind, now, result)
    return result


def _current(conversation: Conversation, kind: str) -> Summary | None:
    with tenant_scope(conversation.tenant_id):
        return (
            Summary.objects.filter(
                conversation_id=conversation.pk,
                kind=kind,
                merged_into__isnull=True,
                superseded_at__isnull=True,
            )
            .order_by("-created_at", "-pk")
            .first()
        )


def _refresh_kind(
    conversation: Conversation,
    policy: ContextPolicy,
    engine: Summarizer,
    kind: str,
    now: datetime,
    result: PeriodicResult,
) -> str:
    config = periodic_settings(policy, kind)
    current = _current(conversation, kind)
    if current is not None and not is_due(current.period_end, config.interval_days, now):
        return "not_due"
    window_start = now - timedelta(days=config.days)
    cap = MAX_SOURCE_MESSAGES[kind]
    fetched = fetch_messages(
        conversation,
        first_seq=max(1, conversation.last_seq - cap + 1),
        last_seq=conversation.last_seq,
        limit=cap,
        counter=counter_for(policy),
        bot_name=policy.bot_name,
        since=window_start,
    )
    if fetched is None:
        if current is None:
            return "inactive"
        with tenant_scope(conversation.tenant_id):
            Summary.objects.filter(pk=current.pk, superseded_at__isnull=True).update(
                superseded_at=now
            )
        result.superseded.append(current.pk)
        return "expired"
    if current is not None and (current.first_seq, current.last_seq) == (
        fetched.first_seq,
        fetched.last_seq,
    ):
        # Nothing new in the window: the summary still describes it; move its period on.
        with tenant_scope(conversation.tenant_id):
            Summary.objects.filter(pk=current.pk).update(period_start=window_start, period_end=now)
        return "unchanged"
    try:
        draft = engine.summarize_messages(fetched.messages, max_tokens=config.tokens, purpose=kind)
    except SummaryFailed as failed:
        logger.warning(
            "%s summary of conversation %s failed: %s", kind, conversation.pk, failed.message
        )
        result.detail = failed.code
        return "failed"
    with transaction.atomic():
        _lock(conversation)
        latest = _current(conversation, kind)
        if (latest.pk if latest else None) != (current.pk if current else None):
            return "raced"
        summary = create_summary(
            conversation,
            kind=kind,
            level=0,
            draft=draft,
            first_seq=fetched.first_seq,
            last_seq=fetched.last_seq,
            first_message_id=fetched.first_id,
            last_message_id=fetched.last_id,
            source_tokens=fetched.source_tokens,
            period_start=window_start,
            period_end=now,
        )
        if summary is None:
            return "raced"
        if current is not None:
            with tenant_scope(conversation.tenant_id):
                Summary.objects.filter(pk=current.pk).update(superseded_at=now)
            result.superseded.append(current.pk)
    result.created.append(summary.pk)
    result.status = "created"
    return "created"


# --- the beat's fan-out -----------------------------------------------------------------------


@dataclass
class DueBatch:
    """One batch of the beat's sweep: what to dispatch, and where the next batch starts."""

    periodic: list[tuple[int, int, tuple[str, ...]]] = field(default_factory=list)
    continuations: list[tuple[int, int]] = field(default_factory=list)
    next_after_id: int | None = None
    scanned: int = 0


def _policies_for(rows: list[dict[str, object]]) -> dict[int, ContextPolicy]:
    """conversation id -> policy, for a batch (three queries whatever the batch size)."""
    tenant_ids = {row["tenant_id"] for row in rows}
    active = dict(Tenant.objects.filter(pk__in=tenant_ids).values_list("pk", "active_policy_id"))
    wanted = {row["policy_id"] for row in rows if row["policy_id"]} | {
        p for p in active.values() if p
    }
    policies = {p.pk: p for p in ContextPolicy.objects.filter(pk__in=wanted)}
    preset = ContextPolicy.objects.filter(tenant__isnull=True, name=DEFAULT_PRESET).first()
    out: dict[int, ContextPolicy] = {}
    for row in rows:
        policy_id = row["policy_id"] or active.get(row["tenant_id"])  # type: ignore[call-overload]
        policy = policies.get(policy_id) if policy_id else None  # type: ignore[arg-type]
        policy = policy or preset
        if policy is not None:
            out[row["pk"]] = policy  # type: ignore[index]
    return out


def periodic_due_batch(*, after_id: int, batch_size: int, now: datetime | None = None) -> DueBatch:
    """The conversations with ``id > after_id`` (at most ``batch_size``) whose periodic
    summaries are due, and continued conversations that still lack a carry-over summary.

    Deliberately cross-tenant (the beat's sweep); it only reads ids and dispatches tasks
    that each run inside their own tenant's scope.
    """
    now = now or timezone.now()
    batch = DueBatch()
    with all_tenants():
        last_at = Message.objects.filter(
            tenant_id=OuterRef("tenant_id"),
            conversation_id=OuterRef("pk"),
            seq=OuterRef("last_seq"),
        ).values("created_at")[:1]
        rows = list(
            Conversation.objects.filter(pk__gt=after_id)
            .order_by("pk")
            .annotate(last_message_at=Subquery(last_at))
            .values("pk", "tenant_id", "policy_id", "last_seq", "archived_at", "last_message_at")[
                :batch_size
            ]
        )
        if not rows:
            return batch
        batch.scanned = len(rows)
        batch.next_after_id = rows[-1]["pk"] if len(rows) == batch_size else None
        ids = [row["pk"] for row in rows]
        policies = _policies_for(rows)
        current: dict[int, dict[str, tuple[datetime | None, int]]] = {}
        covered: dict[int, int] = {}
        for conv_id, kind, period_end, last_seq in Summary.objects.filter(
            conversation_id__in=ids, merged_into__isnull=True, superseded_at__isnull=True
        ).values_list("conversation_id", "kind", "period_end", "last_seq"):
            covered[conv_id] = max(covered.get(conv_id, 0), last_seq)
            previous = current.setdefault(conv_id, {}).get(kind)
            newer = period_end is not None and (
                previous is None or previous[0] is None or period_end > previous[0]
            )
            if previous is None or newer:
                current[conv_id][kind] = (period_end, last_seq)
        continued = set(
            Conversation.objects.filter(continues_id__in=ids, carry_over_summary=True)
            .values_list("continues_id", flat=True)
            .distinct()
        )
    for row in rows:
        conv_id, tenant_id = row["pk"], row["tenant_id"]
        last_message_at: datetime | None = row["last_message_at"]
        if (
            conv_id in continued
            and row["last_seq"] > 0
            and covered.get(conv_id, 0) < row["last_seq"]
            and (last_message_at is None or last_message_at <= now - CONTINUATION_QUIET)
        ):
            batch.continuations.append((tenant_id, conv_id))
        policy = policies.get(conv_id)
        if row["archived_at"] is not None or policy is None or not periodic_enabled(policy):
            continue
        due: list[str] = []
        for kind in PERIODIC_KINDS:
            config = periodic_settings(policy, kind)
            active = last_message_at is not None and last_message_at >= now - timedelta(
                days=config.days
            )
            existing = current.get(conv_id, {}).get(kind)
            # Without a summary: due when active. With one: due at its interval (the task
            # then rebuilds it, or supersedes it if the window has gone quiet).
            if (existing is None and active) or (
                existing is not None and is_due(existing[0], config.interval_days, now)
            ):
                due.append(kind)
        if due:
            batch.periodic.append((tenant_id, conv_id, tuple(due)))
    return batch
