"""Rolling summaries.

The newest ``raw_history_limit`` messages stay raw. When the unsummarised messages before
them reach ``summary_interval`` (or the unsummarised history passes ``summary_trigger_percent``
of the prompt budget), the next chunk of them becomes a summary. Chunks follow the
conversation's sessions (runs of messages with no pause longer than the policy's
``summary_session_gap_minutes``): a chunk ends at the last message before such a pause once
the pause is over, even when shorter than the interval, and a longer session splits by the
interval (:func:`chatplatform.core.context.sessions.chunk_end`, on the dates of at most
``summary_interval + 1`` messages after the covered range). Each run builds at most
``CHUNKS_PER_RUN`` chunks, each fetched by seq range (never the whole conversation), and asks
for another run when more is pending. When the current rolling summaries outnumber
``max_summaries_in_context``, consecutive ones are merged into one of a higher ``level``;
they point to it through ``merged_into``, so the current ones always cover the messages from
the first one on, without a gap, up to the raw history. Merges follow the sessions too: a
session its chunks complete becomes one summary of the session, and the summaries of older
sessions merge into one by whole sessions (summaries of summaries), while the chunks of the
session going on merge among themselves.

The summarizer runs outside any transaction; the insert re-checks, under a short row lock
on the conversation, that nobody covered the range meanwhile (and the unique constraint on
the range backs that up), so concurrent or repeated runs never duplicate a summary.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chatplatform.core.context.sessions import chunk_end, merge_run, session_groups
from chatplatform.core.context.strategies import strategy_for
from chatplatform.locks import cooldown, exclusive, in_cooldown
from chatplatform.models import ContextPolicy
from chatplatform.models.conversations import Conversation
from chatplatform.policies import policy_for
from chatplatform.tenancy.scoping import tenant_scope
from summaries.models import Summary, SummaryKind
from summaries.selectors import last_message_at, message_stamps, rolling_coverage
from summaries.summarizer import (
    SourceSummary,
    StructuredSummary,
    Summarizer,
    SummaryFailed,
)
from summaries.summarizer.engine import summarizer_for

from .storage import (
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
    #: Where the next chunk ends by the sessions (a pause that is over, a full interval, or
    #: a quiet conversation); ``None``: no chunk is complete yet.
    session_end: int | None = None
    #: Where the next chunk ends when one is wanted anyway (the token trigger, a
    #: continuation): at the first pause, else after ``chunk_size`` messages.
    forced_end: int | None = None

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
        return self.session_end is not None or self.by_count or self.by_tokens

    @property
    def next_end(self) -> int | None:
        """The last seq of the next chunk (``None``: nothing may be summarised)."""
        return self.session_end if self.session_end is not None else self.forced_end


def min_token_chunk(interval: int) -> int:
    return max(2, interval // 10)


def prompt_budget(policy: ContextPolicy) -> int:
    window = min(policy.max_context_tokens, policy.model_profile.context_window)
    return max(0, window - policy.reserved_response_tokens)


def session_gap(policy: ContextPolicy) -> timedelta:
    return timedelta(minutes=policy.summary_session_gap_minutes)


def rolling_state(
    conversation: Conversation,
    policy: ContextPolicy,
    *,
    raw_limit: int | None = None,
    chunk_size: int | None = None,
    now: datetime | None = None,
) -> RollingState:
    """Where the conversation stands (``conversation`` must be fresh): one aggregate query,
    and while messages wait, one range query of the dates of at most ``chunk_size + 1`` of
    them (plus the newest message's date when they fall short of a chunk)."""
    raw = policy.raw_history_limit if raw_limit is None else raw_limit
    size = policy.summary_interval if chunk_size is None else chunk_size
    coverage = rolling_coverage(conversation)
    pending = max(0, conversation.last_seq - raw - coverage.covered_upto)
    unsummarised = max(0, conversation.history_tokens - coverage.source_tokens)
    session_end = forced_end = None
    if pending > 0:
        stamps = message_stamps(conversation, first_seq=coverage.covered_upto + 1, limit=size + 1)
        last_allowed, gap = conversation.last_seq - raw, session_gap(policy)
        forced_end = chunk_end(stamps, last_allowed=last_allowed, size=size, gap=gap, quiet=True)
        session_end = chunk_end(stamps, last_allowed=last_allowed, size=size, gap=gap)
        if session_end is None and forced_end is not None:
            newest = last_message_at(conversation)
            quiet = newest is not None and (now or timezone.now()) - newest > gap
            session_end = forced_end if quiet else None
    return RollingState(
        covered_upto=coverage.covered_upto,
        current=coverage.current,
        pending=pending,
        unsummarised_tokens=unsummarised,
        trigger_tokens=prompt_budget(policy) * policy.summary_trigger_percent // 100,
        chunk_size=size,
        session_end=session_end,
        forced_end=forced_end,
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
    now: datetime | None = None,
) -> Result:
    """Bring the conversation's rolling summaries up to date (bounded work; ``more`` says
    whether another run is needed). A conversation of another tenant is ``not_found``.
    ``now`` (default: the clock) decides whether the conversation is quiet."""
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
            now=now,
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
    now: datetime | None = None,
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
        state = rolling_state(
            conversation, policy, raw_limit=raw_limit, chunk_size=chunk_size, now=now
        )
        wanted = state.due or (force and state.pending > 0)
        end = state.next_end
        if not wanted or end is None:
            break
        if chunks >= max_chunks or (deadline is not None and time.monotonic() > deadline):
            result.more = True
            break
        first = state.covered_upto + 1
        if in_cooldown(failure_key(conversation, first)):
            result.status, result.detail = "cooling_down", "the last attempt failed"
            break
        fetched = fetch_messages(
            conversation,
            first_seq=first,
            last_seq=end,
            limit=chunk_size,
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
    """Merge the current rolling summaries into ones of a higher level, returning the last
    merge (``None``: none). First, each session their summaries complete in two or more of
    them (a pause after the last) becomes one summary of the session
    (:func:`~chatplatform.core.context.sessions.session_groups`). Then, when more than
    ``keep`` are current, consecutive ones are merged into one so that at most ``keep`` stay,
    splitting no session where it can (:func:`~chatplatform.core.context.sessions.merge_run`):
    the oldest up to the end of a session, else the older chunks of the session going on.
    The replaced ones get ``merged_into``."""
    keep = max(1, keep)
    gap = session_gap(policy)
    current = current_rolling(conversation, keep)
    merged: Summary | None = None
    groups = session_groups([(s.period_start, s.period_end) for s in current], gap)
    for start, stop in groups:
        merged = merge_summaries(conversation, policy, engine, current[start:stop], result)
        if merged is None:
            return None
    if groups:
        current = current_rolling(conversation, keep)
    if len(current) <= keep:
        return merged
    start, stop = merge_run([(s.period_start, s.period_end) for s in current], keep, gap)
    return merge_summaries(conversation, policy, engine, current[start:stop], result)


def current_rolling(conversation: Conversation, keep: int) -> list[Summary]:
    """The oldest current rolling summaries (at most ``keep`` + :data:`MAX_MERGE_INPUTS`)."""
    with tenant_scope(conversation.tenant_id):
        return list(
            Summary.objects.filter(
                conversation_id=conversation.pk,
                kind=SummaryKind.ROLLING,
                merged_into__isnull=True,
                superseded_at__isnull=True,
            ).order_by("first_seq")[: keep + MAX_MERGE_INPUTS]
        )


def merge_summaries(
    conversation: Conversation,
    policy: ContextPolicy,
    engine: Summarizer,
    victims: list[Summary],
    result: Result,
) -> Summary | None:
    """One summary of a higher level in place of ``victims`` (consecutive current ones)."""
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
