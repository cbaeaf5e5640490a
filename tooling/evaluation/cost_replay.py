"""What a policy's turns cost on the provider's bill (``manage.py bench_cost``).

LoCoMo- or BEAM-format conversations (told from the file) are loaded into a scratch tenant
(rolled back at the end), the way the recall evaluation loads them, and replayed turn by
turn: every turn is stored as a new message by its speaker, at its session's date plus 30 s
per turn, and the prompt the reply pipeline would send for it is built (the real assembly,
the real request and the real Anthropic payload builder, for an Anthropic model profile
counted with ``o200k_base``). Each payload is priced by
:class:`~chatplatform.core.llm.prompt_cache.PromptCache` on the replay's clock: the prefix
up to each breakpoint, the cache lifetime, the minimum cacheable length. No reply is
generated; the cache lives within a session and is gone at the next, days later. Server
compaction is the provider's, simulated (:mod:`tooling.evaluation.compaction_replay`).

The comparison is the same replay sending the whole history with a breakpoint on the newest
message (5-minute lifetime): what not managing the context at all costs, with caching. A
BEAM conversation's assistant messages are the platform's own replies: stored after the user
turn they answer, part of the history, never a turn of their own; on BEAM the replay also
runs under the sliding window at the same budget, the cheapest managed prompt, to compare.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.db import transaction

from chatplatform.core.context import AssemblyInputs, MessageItem, PackingPolicy, assemble
from chatplatform.core.context.strategies import strategy_for, strategy_names
from chatplatform.core.llm.anthropic_payload import build_params
from chatplatform.core.llm.base import ChatRequest, RequestMessage, TextPart
from chatplatform.core.llm.context_management import compaction_trigger
from chatplatform.core.llm.prompt_cache import CacheUsage, PromptCache, anthropic_segments
from chatplatform.core.tokens.bpe import BpeCounter
from chatplatform.models import ContextPolicy, Tenant
from chatplatform.models.conversations import Message, MessageRole
from chatplatform.services import tenant_create
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly.request import chat_request
from chats.assembly.service import assemble_turn
from chats.services.conversations import conversation_window_advance
from tooling.evaluation import datasets, locomo
from tooling.evaluation.compaction_replay import Compacted, compact_turn
from tooling.evaluation.recall import (
    sample_conversation,
    scratch_policy,
    scratch_slug,
    turn_message,
)

STRATEGIES = strategy_names(lambda s: s.in_cost_replay)
SECONDS_PER_TURN = 30
#: The replay's model: Claude Sonnet 4.5's prices and minimum cacheable prompt.
MODEL = "claude-sonnet-4-5"
MIN_CACHEABLE_TOKENS = 1024
#: The whole history always fits: the comparison never trims.
FULL_HISTORY = PackingPolicy(
    strategy="sliding_window",
    context_window=10_000_000,
    max_context_tokens=10_000_000,
    reserved_response_tokens=locomo.EVAL_RESERVED_RESPONSE,
    system_budget=10_000,
    facts_budget=0,
    summaries_budget=0,
    retrieval_budget=0,
    min_recent_messages=0,
    recent_message_cap=10_000_000,
    max_facts=0,
)


class _Rollback(Exception):
    """Raised to roll the scratch data back once results are computed."""


@dataclass
class CostOptions:
    strategy: str = "hybrid"
    budget: int = 4000
    history_trim_percent: int = 60
    turn_retrieval_percent: int = 7
    cache_ttl: str = "5m"
    #: Server compaction: the input-token trigger (default: the policy's, which the provider
    #: never accepts below 50,000 tokens; a lower one simulates what the API does not offer).
    compaction_trigger: int | None = None
    #: Keep the users' standing instructions and preferences (as on intake) in the prompts.
    instructions: bool = True


@dataclass
class _Tally:
    turns: int = 0
    prompt_tokens: int = 0
    billed: float = 0.0
    read: int = 0
    total: int = 0
    over_budget: int = 0
    compactions: int = 0
    #: The bill's parts in input-token equivalents (a compacting turn counts in none).
    uncached_billed: float = 0.0
    written_billed: float = 0.0
    read_billed: float = 0.0

    def add_compacted(self, done: Compacted) -> None:
        """A compacting turn: the compaction's own iteration and the reply's, both billed."""
        self.turns += 1
        self.compactions += 1
        self.prompt_tokens += done.prompt_tokens
        self.billed += done.compaction_billed + done.reply_billed
        self.read += done.read
        self.total += done.total

    def add(self, usage: CacheUsage, prompt_tokens: int, over: bool) -> None:
        self.turns += 1
        self.prompt_tokens += prompt_tokens
        self.billed += usage.billed
        self.read += usage.read
        self.total += usage.total
        self.over_budget += int(over)
        self.uncached_billed += usage.uncached
        self.read_billed += usage.billed_read
        self.written_billed += usage.billed - usage.uncached - usage.billed_read

    def merge(self, other: _Tally) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def run_cost(
    path: str | Path,
    options: CostOptions,
    *,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Replay the LoCoMo-format file at ``path`` under ``options``; return the JSON result."""
    if options.strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {options.strategy!r}: pick one of {STRATEGIES}")
    kind, samples = datasets.load_samples(path)
    result: dict[str, Any] = {}
    try:
        with transaction.atomic():
            result = _run(samples, options, progress)
            if kind == datasets.BEAM:
                result.update(_against_sliding_window(samples, options, result, progress))
            raise _Rollback
    except _Rollback:
        pass
    return result


def _against_sliding_window(
    samples: list[locomo.Sample],
    options: CostOptions,
    result: dict[str, Any],
    progress: Callable[[str], None] | None,
) -> dict[str, Any]:
    """The same replay under the sliding window at the same budget (the cheapest managed
    prompt), and this policy's bill per turn against it, overall and per conversation."""
    replay = _run(samples, replace(options, strategy="sliding_window"), progress)
    for own, windowed in zip(result["per_conversation"], replay["per_conversation"], strict=True):
        own["sliding_window_per_turn"] = windowed["billed_per_turn"]
        own["ratio_to_sliding_window"] = _ratio(own["billed_per_turn"], windowed["billed_per_turn"])
    window = replay["billed_per_turn"]
    return {
        "sliding_window_per_turn": window,
        "ratio_to_sliding_window": _ratio(result["billed_per_turn"], window),
    }


def _ratio(billed: float, baseline: float) -> float | None:
    return round(billed / baseline, 3) if baseline else None


def _run(
    samples: list[locomo.Sample],
    options: CostOptions,
    progress: Callable[[str], None] | None,
) -> dict[str, Any]:
    tenant = tenant_create(name="Cost replay (scratch)", slug=scratch_slug("cost-replay"))
    policy = _policy(tenant, options)
    counter = BpeCounter("o200k_base")
    managed, full = _Tally(), _Tally()
    each: list[dict[str, Any]] = []
    for index, sample in enumerate(samples):
        own, own_full = _Tally(), _Tally()
        _replay(tenant, policy, sample, index, counter, own, own_full, _trigger(options))
        managed.merge(own)
        full.merge(own_full)
        each.append(_conversation_figures(sample.sample_id, own, own_full))
        if progress:
            progress(f"{sample.sample_id}: {managed.turns} turns replayed")
    n = max(1, managed.turns)
    billed = managed.billed / n
    baseline = full.billed / max(1, full.turns)
    compaction = {}
    if strategy_for(options.strategy).needs.provider_compaction:
        compaction = {"compaction_trigger": _trigger(options), "compactions": managed.compactions}
    return {
        "strategy": options.strategy,
        "budget": options.budget,
        "conversations": len(samples),
        "turns": managed.turns,
        "mean_prompt_tokens": round(managed.prompt_tokens / n, 1),
        "billed_per_turn": round(billed, 1),
        "full_history_cached_per_turn": round(baseline, 1),
        "ratio": _ratio(billed, baseline),
        "cache_read_share": round(managed.read / managed.total, 3) if managed.total else 0.0,
        "over_budget": managed.over_budget,
        "billed_parts_per_turn": {
            "uncached": round(managed.uncached_billed / n, 1),
            "cache_write": round(managed.written_billed / n, 1),
            "cache_read": round(managed.read_billed / n, 1),
        },
        "per_conversation": each,
        **compaction,
    }


def _conversation_figures(sample_id: str, managed: _Tally, full: _Tally) -> dict[str, Any]:
    """One conversation's bill: the ratio is an aggregate, and a shorter conversation's
    whole history costs less, so its ratio runs higher than a longer one's."""
    billed = managed.billed / max(1, managed.turns)
    baseline = full.billed / max(1, full.turns)
    return {
        "sample_id": sample_id,
        "turns": managed.turns,
        "billed_per_turn": round(billed, 1),
        "ratio": _ratio(billed, baseline),
    }


def _trigger(options: CostOptions) -> int:
    if options.compaction_trigger is not None:
        return options.compaction_trigger
    return compaction_trigger(options.budget)


def _replay(
    tenant: Tenant,
    policy: ContextPolicy,
    sample: locomo.Sample,
    index: int,
    counter: BpeCounter,
    managed: _Tally,
    full: _Tally,
    trigger: int,
) -> None:
    conversation, users, first = sample_conversation(tenant, policy, sample, index)
    managed_cache = PromptCache(min_tokens=MIN_CACHEABLE_TOKENS)
    full_cache = PromptCache(min_tokens=MIN_CACHEABLE_TOKENS)
    history: list[MessageItem] = []
    compacts = strategy_for(policy.strategy).needs.provider_compaction
    epoch = datetime(2000, 1, 1, tzinfo=UTC)
    multi_user = len(sample.speakers) > 1
    for session in sample.sessions:
        for k, turn in enumerate(t for t in session.turns if t.text.strip()):
            when = session.when.replace(tzinfo=UTC) + timedelta(seconds=SECONDS_PER_TURN * k)
            clock = (when - epoch).total_seconds()
            with tenant_scope(tenant):
                message = turn_message(conversation, turn, users, first)
                Message.objects.filter(pk=message.pk).update(created_at=when)
                message.created_at = when
            if message.role == MessageRole.ASSISTANT:
                # The platform's own reply: stored, part of the history, not a turn.
                history.append(_item(message, turn, when))
                continue
            with tenant_scope(tenant):
                prepared = assemble_turn(conversation, message, now=when, policy=policy)
                conversation_window_advance(
                    conversation,
                    prepared.prompt.window_start_seq,
                    prepared.prompt.recalled_ids,
                    when,
                    summary_ids=prepared.prompt.summary_ids,
                    excerpt_ids=prepared.prompt.recalled_excerpt_ids,
                )
            request = chat_request(prepared, tools=False)
            usage = managed_cache.price(_segments(request, counter), clock)
            prompt = prepared.prompt
            if compacts and usage.total > trigger:
                # The provider compacts first (billed apart), then answers from the block.
                done = compact_turn(
                    conversation,
                    message,
                    request,
                    usage.billed,
                    usage.total,
                    counter=counter,
                    cache=managed_cache,
                    clock=clock,
                )
                managed.add_compacted(done)
            else:
                managed.add(usage, prompt.prompt_tokens, prompt.prompt_tokens > prompt.budget)
            item = _item(message, turn, when)
            usage = full_cache.price(
                _segments(_full_request(policy, history, item, counter, multi_user), counter),
                clock,
            )
            full.add(usage, 0, False)
            history.append(item)


def _item(message: Message, turn: locomo.Turn, when: datetime) -> MessageItem:
    """A replayed message as the whole-history comparison sends it."""
    return MessageItem(
        id=message.pk,
        seq=message.seq,
        role="assistant" if message.role == MessageRole.ASSISTANT else "user",
        content=turn.text,
        author=turn.speaker,
        tokens=message.token_count,
        counted_by=message.token_counter,
        created_at=when,
    )


def _segments(request: ChatRequest, counter: BpeCounter) -> list[Any]:
    return anthropic_segments(build_params(request), counter.count)


def _full_request(
    policy: ContextPolicy,
    history: list[MessageItem],
    new: MessageItem,
    counter: BpeCounter,
    multi_user: bool,
) -> ChatRequest:
    """The whole history and the new message, one block per turn, a breakpoint on the
    system prompt and one on the newest message."""
    inputs = AssemblyInputs(
        new_message=new,
        system_template=policy.system_prompt_template,
        variables={"chatname": "LoCoMo", "botname": policy.bot_name},
        recent=list(reversed(history)),
        multi_user=multi_user,
        bot_name=policy.bot_name,
    )
    prompt = assemble(FULL_HISTORY, inputs, counter)
    messages = [
        RequestMessage(m["role"], [TextPart(text) for text in blocks])  # type: ignore[arg-type]
        for m, blocks in zip(prompt.messages, prompt.blocks, strict=True)
    ]
    last = len(messages) - 1
    return ChatRequest(
        model=MODEL,
        system=[prompt.system],
        cache_prefix=1,
        cache_breakpoints=((last, len(prompt.blocks[last]) - 1),),
        messages=messages,
        max_tokens=locomo.EVAL_RESERVED_RESPONSE,
    )


def _policy(tenant: Tenant, options: CostOptions) -> ContextPolicy:
    return scratch_policy(
        tenant,
        locomo.eval_policy_fields(
            options.strategy, options.budget, instructions=options.instructions
        ),
        name=f"Cost replay ({options.strategy}, {options.budget})",
        profile={
            "name": "Cost replay model (o200k_base)",
            "provider": "anthropic",
            "model": MODEL,
            "cache_min_tokens": MIN_CACHEABLE_TOKENS,
            "price_input_per_mtok": Decimal(3),
            "price_output_per_mtok": Decimal(15),
            "price_cache_read_per_mtok": Decimal("0.3"),
            "price_cache_write_per_mtok": Decimal("3.75"),
            "price_cache_write_1h_per_mtok": Decimal(6),
        },
        retrieval_dense=False,
        history_trim_percent=options.history_trim_percent,
        turn_retrieval_percent=options.turn_retrieval_percent,
        cache_ttl=options.cache_ttl,
        instructions_enabled=options.instructions,
    )
