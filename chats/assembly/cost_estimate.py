"""What a policy's turns would cost on a conversation: its last user turns replayed under the
policy, each at the time it was sent, priced with the provider's prompt-cache rules
(:mod:`chatplatform.core.llm.prompt_cache`), beside the whole history sent with caching.

Read-only: the replay keeps the history window in memory and stores nothing. Bounded: a
fixed number of turns, each one assembly, plus one query for the turns and one for the
message sizes after the first of them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from chatplatform.core.llm.anthropic_payload import build_params
from chatplatform.core.llm.cost_comparison import COST_QUANTUM
from chatplatform.core.llm.prompt_cache import (
    CacheUsage,
    PromptCache,
    anthropic_segments,
    full_history_usage,
    still_cached,
)
from chatplatform.models import ContextPolicy, ModelProfile
from chatplatform.models.conversations import Conversation, Message, MessageRole
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly.request import chat_request
from chats.assembly.service import assemble_context, message_item

REPLAYED_TURNS = 20


@dataclass(frozen=True)
class CostEstimate:
    """Means per turn over ``turns`` replayed turns: input-token equivalents as billed
    (uncached + write multiplier x written + 0.1 x read) and their price in USD (prompt only;
    the reply costs the same either way)."""

    turns: int
    billed_tokens: float
    cost_usd: Decimal
    full_history_billed_tokens: float
    full_history_cost_usd: Decimal
    cache_read_share: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "billed_tokens": round(self.billed_tokens, 1),
            "cost_usd": str(self.cost_usd),
            "full_history_billed_tokens": round(self.full_history_billed_tokens, 1),
            "full_history_cost_usd": str(self.full_history_cost_usd),
            "cache_read_percent": round(100 * self.cache_read_share, 1),
        }


def expected_turn_cost(
    conversation: Conversation, policy: ContextPolicy, *, turns: int = REPLAYED_TURNS
) -> CostEstimate:
    """Replay the last ``turns`` user messages of ``conversation`` under ``policy``."""
    profile = policy.model_profile
    with tenant_scope(conversation.tenant_id):
        replayed = list(
            Message.objects.filter(
                tenant_id=conversation.tenant_id, conversation=conversation, role=MessageRole.USER
            )
            .select_related("author")
            .order_by("-seq")[:turns]
        )[::-1]
        later = _tokens_from(conversation, replayed[0].seq) if replayed else {}
    minimum = profile.cache_min_tokens if profile.provider_kind.breakpoint_cache else 0
    cache = PromptCache(min_tokens=minimum)
    state = copy.copy(conversation)
    state.window_start_seq, state.window_sent_at = None, None
    state.window_recalled_ids, state.window_summary_ids = [], []
    state.window_excerpt_ids = []
    usages: list[CacheUsage] = []
    fulls: list[CacheUsage] = []
    previous_full: int | None = None
    previous_at = None
    for message in replayed:
        when = message.created_at
        item = message_item(message, message.author)
        turn = assemble_context(
            state,
            item,
            author=message.author,
            policy=policy,
            now=when,
            conversation_is_fresh=True,
        )
        request = chat_request(turn, tools=False)
        segments = anthropic_segments(build_params(request), turn.counter.count)
        usages.append(cache.price(segments, when.timestamp()))
        state.window_start_seq = turn.prompt.window_start_seq
        state.window_recalled_ids = list(turn.prompt.recalled_ids)
        state.window_excerpt_ids = list(turn.prompt.recalled_excerpt_ids)
        state.window_summary_ids = turn.prompt.summary_ids
        state.window_sent_at = when
        system = turn.prompt.section("system")
        full = (
            conversation.history_tokens
            - sum(n for seq, n in later.items() if seq >= message.seq)
            + (system.used if system else 0)
            + (message.token_count or 0)
        )
        warm = still_cached(previous_at, when)
        fulls.append(full_history_usage(full, previous_full if warm else None, min_tokens=minimum))
        previous_full, previous_at = full, when
    return _estimate(usages, fulls, profile, policy.cache_ttl)


def _tokens_from(conversation: Conversation, first_seq: int) -> dict[int, int]:
    """Stored token counts of the messages from ``first_seq`` on (a bounded tail)."""
    rows = Message.objects.filter(
        tenant_id=conversation.tenant_id, conversation=conversation, seq__gte=first_seq
    ).values_list("seq", "token_count")
    return {seq: int(tokens or 0) for seq, tokens in rows}


def _estimate(
    usages: list[CacheUsage], fulls: list[CacheUsage], profile: ModelProfile, ttl: str
) -> CostEstimate:
    n = len(usages)
    if not n:
        return CostEstimate(0, 0.0, Decimal(0), 0.0, Decimal(0), 0.0)

    def price(usage: CacheUsage, usage_ttl: str) -> Decimal:
        return profile.cost_usd(
            input_tokens=usage.uncached,
            output_tokens=0,
            cache_read_tokens=usage.read,
            cache_write_tokens=usage.written,
            cache_ttl=usage_ttl,
        )

    total = sum(u.total for u in usages)
    return CostEstimate(
        turns=n,
        billed_tokens=sum(u.billed for u in usages) / n,
        cost_usd=(sum((price(u, ttl) for u in usages), Decimal(0)) / n).quantize(COST_QUANTUM),
        full_history_billed_tokens=sum(f.billed for f in fulls) / n,
        full_history_cost_usd=(sum((price(f, "5m") for f in fulls), Decimal(0)) / n).quantize(
            COST_QUANTUM
        ),
        cache_read_share=sum(u.read for u in usages) / total if total else 0.0,
    )
