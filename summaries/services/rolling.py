"""Rolling summaries.

The newest ``raw_history_limit`` messages stay raw. When the unsummarised messages before
them reach ``summary_interval`` (or the unsummarised history passes ``summary_trigger_percent``
of the prompt budget), the next chunk of them becomes a summary. Each run builds at most
``CHUNKS_PER_RUN`` chunks, each fetched by seq range (never the whole conversation), and asks
for another run when more is pending. When the current rolling summaries outnumber
``max_summaries_in_context``, the oldest are merged into one of a higher ``level``; they point
to it through ``merged_into``.

The summarizer runs outside any transaction; the insert re-checks, under a short row lock
on the conversation, that nobody covered the range meanwhile (and the unique constraint on
the range backs that up), so concurrent or repeated runs never duplicate a summary.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from chatplatform.core.context.strategies import strategy_for
from chatplatform.locks import cooldown, exclusive, in_cooldown
from chatplatform.models import ContextPolicy
from chatplatform.models.conversations import Conversation
from chatplatform.policies import policy_for
from chatplatform.tenancy.scoping import tenant_scope
from summaries.models import Summary, SummaryKind
from summaries.selectors import rolling_coverage
from summaries.summarizer import (
    SourceSummary,
    StructuredSummary,
    Summarizer,
    SummaryFailed,
)
from summaries.summarizer.engine import summarizer_for

from .common import (
    Result,
    counter_for,
    create_summary,
    fetch_messages,
    load_conversation,
    lock_conversation,
)

logger = logging.getLogger(__name__)

CHUNKS_PER_RUN = 4
LOCK_SECONDS = settings.JOB_LOCK_SECONDS  # outlives the task's hard time limit
FAILURE_COOLDOWN_SECONDS = 30 * 60
MAX_MERGE_INPUTS = 40


@dataclass(frozen=True)
class RollingState:
    covered_upto: int
    current: int
    pending: int
    unsummarised_tokens: int
    trigger_tokens: int
    chunk_size: int

    @property
    def by_count(self) -> bool:
        return self.pending >= self.chunk_size

    @property
    def by_tokens(self) -> bool:
        return (
            self.pending >= min_token_chunk(self.chunk_size)
            and self.unsummarised_tokens >= self.trigger_tokens
        )

    @property
    def due(self) -> bool:
        return self.by_count or self.by_tokens


def min_token_chunk(interval: int) -> int:
    return max(2, interval // 10)


def prompt_budget(policy: ContextPolicy) -> int:
    window = min(policy.max_context_tokens, policy.model_profile.context_window)
    return max(0, window - policy.reserved_response_tokens)


def rolling_state(
    conversation: Conversation, policy: ContextPolicy, *, raw_limit: int | None = None
) -> RollingState:
    """Where the conversation stands (one aggregate query; ``conversation`` must be fresh)."""
    raw = policy.raw_history_limit if raw_limit is None else raw_limit
    coverage = rolling_coverage(conversation)
    pending = max(0, conversation.last_seq - raw - coverage.covered_upto)
    unsummarised = max(0, conversation.history_tokens - coverage.source_tokens)
    return RollingState(
        covered_upto=coverage.covered_upto,
        current=coverage.current,
        pending=pending,
        unsummarised_tokens=unsummarised,
        trigger_tokens=prompt_budget(policy) * policy.summary_trigger_percent // 100,
        chunk_size=policy.summary_interval,
    )


def uses_summaries(policy: ContextPolicy) -> bool:
    """Whether the policy's prompts can show rolling summaries (the rolling job works for it)."""
    return strategy_for(policy.strategy).needs.rolling_summaries and policy.summaries_budget > 0


def failure_key(conversation: Conversation, first_seq: int) -> str:
    return f"rolling-failed:t{conversation.tenant_id}:c{conversation.pk}:{first_seq}"


def summary_refresh(
    tenant_id: int,
    conversation_id: int,
    *,
    summarizer: Summarizer | None = None,
    max_chunks: int = CHUNKS_PER_RUN,
    deadline: float | None = None,
) -> Result:
    """Bring the conversation's rolling summaries up to date (bounded work; ``more`` says
    whether another run is needed). A conversation of another tenant is ``not_found``."""
    conversation = load_conversation(tenant_id, conversation_id)
    if conversation is None:
        return Result(status="not_found")
    policy = policy_for(conversation)
    if not uses_summaries(policy):
        return Result(status="disabled", detail="the policy's strategy uses no summaries")
    with exclusive(
        f"rolling:t{conversation.tenant_id}:c{conversation.pk}", LOCK_SECONDS
    ) as acquired:
        if not acquired:
            return Result(status="locked")
        engine = summarizer or summarizer_for(policy)
        return advance_rolling(
            conversation,
            policy,
            engine,
            raw_limit=policy.raw_history_limit,
            chunk_size=policy.summary_interval,
            force=False,
            max_chunks=max_chunks,
            deadline=deadline,
            purpose="rolling",
        )


def advance_rolling(
    conversation: Conversation,
    policy: ContextPolicy,
    engine: Summarizer,
    *,
    raw_limit: int,
    chunk_size: int,
    force: bool,
    max_chunks: int,
    deadline: float | None,
    purpose: str,
    max_current: int | None = None,
) -> Result:
    """Summarise up to ``max_chunks`` chunks after the covered range, merging as needed.
    ``force`` summarises whatever is pending outside ``raw_limit`` (continuation)."""
    result = Result(status="not_due")
    counter = counter_for(policy)
    keep = max_current if max_current is not None else policy.max_summaries_in_context
    chunks = 0
    while True:
        with tenant_scope(conversation.tenant_id):
            conversation = Conversation.objects.get(pk=conversation.pk)
        state = rolling_state(conversation, policy, raw_limit=raw_limit)
        wanted = state.due or (force and state.pending > 0)
        if not wanted:
            break
        if chunks >= max_chunks or (deadline is not None and time.monotonic() > deadline):
            result.more = True
            break
        first = state.covered_upto + 1
        if in_cooldown(failure_key(conversation, first)):
            result.status, result.detail = "cooling_down", "the last attempt failed"
            break
        size = chunk_size if state.pending >= chunk_size else state.pending
        fetched = fetch_messages(
            conversation,
            first_seq=first,
            last_seq=conversation.last_seq - raw_limit,
            limit=size,
            counter=counter,
            bot_name=policy.bot_name,
        )
        if fetched is None:
            break
        try:
            draft = engine.summarize_messages(
                fetched.messages, max_tokens=policy.summary_max_tokens, purpose=purpose
            )
        except SummaryFailed as failed:
            logger.warning(
                "rolling summary of conversation %s (%s-%s) failed: %s",
                conversation.pk,
                fetched.first_seq,
                fetched.last_seq,
                failed.message,
            )
            cooldown(failure_key(conversation, first), FAILURE_COOLDOWN_SECONDS)
            result.status, result.detail = "failed", failed.code
            break
        with transaction.atomic():
            lock_conversation(conversation)
            if rolling_coverage(conversation).covered_upto != state.covered_upto:
                break  # another run covered it meanwhile
            summary = create_summary(
                conversation,
                kind=SummaryKind.ROLLING,
                level=0,
                draft=draft,
                first_seq=fetched.first_seq,
                last_seq=fetched.last_seq,
                first_message_id=fetched.first_id,
                last_message_id=fetched.last_id,
                source_tokens=fetched.source_tokens,
                period_start=fetched.first_at,
                period_end=fetched.last_at,
            )
        if summary is None:
            break
        chunks += 1
        result.created.append(summary.pk)
        result.status = "created"
        merge_rolling(conversation, policy, engine, keep=keep, result=result)
    return result


def merge_rolling(
    conversation: Conversation,
    policy: ContextPolicy,
    engine: Summarizer,
    *,
    keep: int,
    result: Result,
) -> Summary | None:
    """When more than ``keep`` rolling summaries are current, merge the oldest into one of a
    higher level (leaving ``keep``). The replaced ones get ``merged_into``."""
    keep = max(1, keep)
    with tenant_scope(conversation.tenant_id):
        current = list(
            Summary.objects.filter(
                conversation_id=conversation.pk,
                kind=SummaryKind.ROLLING,
                merged_into__isnull=True,
                superseded_at__isnull=True,
            ).order_by("first_seq")[: keep + MAX_MERGE_INPUTS]
        )
    if len(current) <= keep:
        return None
    victims = current[: len(current) - keep + 1]
    try:
        draft = engine.merge_summaries(
            [
                SourceSummary(s.first_seq, s.last_seq, StructuredSummary.from_content(s.content))
                for s in victims
            ],
            max_tokens=policy.summary_max_tokens,
        )
    except SummaryFailed as failed:
        logger.warning("merging summaries of conversation %s failed: %s", conversation.pk, failed)
        result.detail = f"merge failed: {failed.code}"
        return None
    ids = [s.pk for s in victims]
    with transaction.atomic():
        lock_conversation(conversation)
        with tenant_scope(conversation.tenant_id):
            still_current = Summary.objects.filter(
                pk__in=ids, merged_into__isnull=True, superseded_at__isnull=True
            ).count()
        if still_current != len(ids):
            return None
        merged = create_summary(
            conversation,
            kind=SummaryKind.ROLLING,
            level=max(s.level for s in victims) + 1,
            draft=draft,
            first_seq=victims[0].first_seq,
            last_seq=max(s.last_seq for s in victims),
            first_message_id=victims[0].first_message_id,
            last_message_id=max(victims, key=lambda s: s.last_seq).last_message_id,
            source_tokens=sum(s.source_tokens for s in victims),
            period_start=victims[0].period_start,
            period_end=max(victims, key=lambda s: s.last_seq).period_end,
        )
        if merged is None:
            return None
        with tenant_scope(conversation.tenant_id):
            Summary.objects.filter(pk__in=ids).update(merged_into=merged)
    result.merged.append(merged.pk)
    return merged
