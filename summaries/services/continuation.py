"""Carry-over summaries for continued conversations.

The assembly of a conversation that ``continues`` another reads the latest current summary of
the earlier one. :func:`continuation_summary_ensure` makes sure that summary exists and covers
the whole earlier history: rolling summaries over everything (no raw window), in bounded
chunks across as many runs as needed, and once the end is reached the current ones are merged
into one, so the latest summary is a summary of the whole conversation.
"""

from __future__ import annotations

from chatplatform.locks import exclusive
from chatplatform.models.conversations import Conversation
from chatplatform.policies import policy_for
from summaries.selectors import latest_summary_seq, rolling_coverage
from summaries.summarizer import Summarizer
from summaries.summarizer.engine import summarizer_for

from .rolling import LOCK_SECONDS, advance_rolling, merge_rolling
from .storage import Result, load_conversation

#: Chunks are larger than rolling ones: the history is finished, fewer calls are better.
CHUNK_MESSAGES = 200
CHUNKS_PER_RUN = 4


def needs_continuation_summary(conversation: Conversation) -> bool:
    """True while no current summary reaches the conversation's last message."""
    return conversation.last_seq > 0 and latest_summary_seq(conversation) < conversation.last_seq


def continuation_summary_ensure(
    tenant_id: int,
    conversation_id: int,
    *,
    summarizer: Summarizer | None = None,
    max_chunks: int = CHUNKS_PER_RUN,
    deadline: float | None = None,
) -> Result:
    """Summarise the whole history of ``conversation_id`` (the conversation being continued)
    into one current summary, a bounded number of chunks per run (``more`` asks for another)."""
    conversation = load_conversation(tenant_id, conversation_id)
    if conversation is None:
        return Result(status="not_found")
    if not needs_continuation_summary(conversation):
        return Result(status="not_due")
    policy = policy_for(conversation)
    with exclusive(
        f"rolling:t{conversation.tenant_id}:c{conversation.pk}", LOCK_SECONDS
    ) as acquired:
        if not acquired:
            return Result(status="locked", more=True)
        engine = summarizer or summarizer_for(policy)
        result = advance_rolling(
            conversation,
            policy,
            engine,
            raw_limit=0,
            chunk_size=max(policy.summary_interval, CHUNK_MESSAGES),
            force=True,
            max_chunks=max_chunks,
            deadline=deadline,
            purpose="continuation",
        )
        if result.more or result.status in ("failed", "cooling_down"):
            return result
        if rolling_coverage(conversation).current > 1:
            merged = merge_rolling(conversation, policy, engine, keep=1, result=result)
            if merged is not None and result.status == "not_due":
                result.status = "created"
        return result
