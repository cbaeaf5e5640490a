"""Assemble the prompt of one turn from the conversation's policy (Django adapter over the
pure core ``chatplatform.core.context``).

Contract of :func:`assemble_context`: reads only (no writes, no locks); a bounded number of
queries whatever the length of the history (see ``selectors``); the returned prompt satisfies
``ceil(prompt_tokens * margin_ratio) <= window - reserved response`` under the policy model's
counter (the pure core's guarantee).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from chatplatform.core.context.budget import (
    MAX_CALIBRATION_RATIO,
    MIN_CALIBRATION_RATIO,
    history_fetch_ceiling,
    sections_within_room,
)
from chatplatform.core.context.formatting import person_label, tool_calls_text
from chatplatform.core.context.packing import assemble
from chatplatform.core.context.strategies import strategy_for
from chatplatform.core.context.template import time_values
from chatplatform.core.context.types import (
    AssembledPrompt,
    AssemblyInputs,
    MessageItem,
    RetrievedItem,
    SummaryItem,
)
from chatplatform.core.llm.prompt_cache import still_cached
from chatplatform.core.tokens import TokenCounter
from chatplatform.core.tokens.calibration import CalibrationState, calibrated_margin
from chatplatform.counting import storage_counter_for
from chatplatform.models import ContextPolicy, ModelProfile
from chatplatform.models.conversations import Conversation, Message
from chatplatform.models.packing import packing_policy_for
from chatplatform.policies import policy_for
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly import selectors
from chats.retrieval.dense import DenseRetrieval, dense_enabled, dense_status
from chats.retrieval.retriever import early_question, recalled_items, retrieve_for_assembly
from chats.retrieval.standing import instructions_for_message
from summaries.selectors import current_summaries, latest_compaction

#: A retriever returns candidates relevant to the new message among messages older than
#: ``before_seq`` (those the recent window will not show).
#: ``(conversation, new message, policy, before_seq, ids of the summaries the prompt shows)``.
Retriever = Callable[
    [Conversation, MessageItem, ContextPolicy, int, frozenset[int]], list[RetrievedItem]
]

TOOLS_DESCRIPTION = (
    "save_user_fact(text, key?) stores a fact about the user; get_user_facts() lists them."
)


def calibration_state(profile: ModelProfile) -> CalibrationState:
    """The model's running ratio of provider-reported to estimated prompt tokens."""
    return CalibrationState(
        count=profile.calibration_samples,
        mean=profile.calibration_ratio_mean,
        m2=profile.calibration_ratio_m2,
    )


def calibration_ratio_for(counter: TokenCounter, profile: ModelProfile) -> float:
    """The online calibration factor of ``counter``'s counts for ``profile``'s model.

    1.0 for exact counters (their counts are the model's). Until the model has
    ``MIN_SAMPLES`` reports, the prior ratio of its family (its provider's ``prior_ratio``:
    newer Claude models count about 30 % more tokens for the same text), so a new profile's
    first turns fit a tight window. Then the provider's counts are the estimate times the mean ratio
    (the estimates are scaled), and the margin on that calibrated estimate is the estimator's
    fitted margin or the spread of the observed ratios, whichever is wider: the factor is
    ``calibrated_margin(state, mean * fitted) / fitted``, so the total multiplier
    ``fitted * factor`` bounds the next prompt's real size. A model that counts fewer tokens
    than estimated (mean < 1) gets a factor below 1, i.e. a larger effective budget.
    """
    if counter.exact:
        return 1.0
    state = calibration_state(profile)
    if not state.ready:
        return profile.provider_kind.prior_ratio(profile.model)
    fitted = max(1.0, float(getattr(counter, "margin", 1.0)))
    factor = calibrated_margin(state, base_margin=state.mean * fitted) / fitted
    return min(MAX_CALIBRATION_RATIO, max(MIN_CALIBRATION_RATIO, factor))


def _safety_margin(counter: TokenCounter, policy: ContextPolicy) -> float:
    fitted = float(getattr(counter, "margin", 1.0))
    return fitted * (1.0 + policy.safety_margin_percent / 100.0)


@dataclass
class TurnContext:
    """An assembled turn: the prompt plus what the record and the provider need."""

    prompt: AssembledPrompt
    policy: ContextPolicy
    profile: ModelProfile
    counter: TokenCounter
    hypothetical_tokens: int
    assembly_ms: float
    facts: list[Any] = field(default_factory=list)
    retrieved_ids: list[Any] = field(default_factory=list)
    #: Every message and summary the assembly could choose from, by id: what the prompt
    #: holds is named from them (seq numbers, excerpts) in the provider's context report.
    messages: dict[Any, MessageItem] = field(default_factory=dict)
    summaries: list[SummaryItem] = field(default_factory=list)
    #: Retrieval by meaning this turn: off (the policy does not ask for it or nothing was
    #: retrieved), on, or unavailable (asked for; embeddings not installed or the model failed
    #: to load: full-text only).
    dense: DenseRetrieval = DenseRetrieval.OFF
    #: Server compaction: the provider's newest compaction block, as it returned it (sent back
    #: before the history when the prompt includes its summary).
    compaction_block: dict[str, Any] | None = None
    #: The conversation's tenant (what the request reads more of runs in its scope).
    tenant_id: int | None = None


def _system_variables(
    conversation: Conversation, author: Any, policy: ContextPolicy, now: datetime, members: int
) -> dict[str, object]:
    full_name = author.get_full_name() if author is not None else ""
    username = f"@{author.username}" if author is not None else ""
    return {
        "chatname": conversation.title
        or ("Group chat" if conversation.is_group else "Private chat"),
        "chatid": conversation.pk,
        "chattype": "group" if conversation.is_group else "private",
        "username": username,
        "userfullname": full_name or username,
        "userid": author.pk if author is not None else "",
        "botname": policy.bot_name,
        "botusername": "@" + policy.bot_name.lower().replace(" ", "_"),
        "membercount": members,
        "tools": TOOLS_DESCRIPTION if policy.tools_enabled else "none",
        **time_values(timezone.localtime(now)),
    }


def cached_window_start(
    conversation: Conversation, policy: ContextPolicy, now: datetime
) -> int | None:
    """The start of the history window the provider still caches: the stored one, while the
    last prompt that held it is younger than the policy's cache lifetime."""
    if not still_cached(conversation.window_sent_at, now, policy.cache_ttl):
        return None
    return conversation.window_start_seq


def assemble_context(
    conversation: Conversation,
    new_message: MessageItem,
    *,
    author: Any = None,
    policy: ContextPolicy | None = None,
    retriever: Retriever | None = None,
    now: datetime | None = None,
    budget_override: int | None = None,
    conversation_is_fresh: bool = False,
) -> TurnContext:
    """Build the prompt for ``new_message`` (stored or not) in ``conversation``.

    ``budget_override`` lowers the prompt budget (tokens), e.g. after a provider answered
    "prompt is too long". ``retriever`` defaults to the full-text retrieval when installed.
    """
    started = time.perf_counter()
    if not conversation_is_fresh:
        with tenant_scope(conversation.tenant_id):
            # Fresh running totals: the caller's instance may predate the messages just stored.
            conversation = Conversation.objects.get(pk=conversation.pk)
    policy = policy or policy_for(conversation)
    strategy = strategy_for(policy.strategy)
    needs = strategy.needs
    # The new message's embedding (retrieval by meaning) starts before the first query.
    question = (
        early_question(new_message, policy) if retriever is None and needs.retrieval else None
    )
    profile = policy.model_profile
    counter = storage_counter_for(profile)
    packing = sections_within_room(
        packing_policy_for(
            policy,
            margin_ratio=1.0 if counter.exact else _safety_margin(counter, policy),
            calibration_ratio=calibration_ratio_for(counter, profile),
            budget_override=budget_override,
            clamp_to_model=True,
        ),
        exact=counter.exact,
        counter_overhead=counter.message_overhead,
    )
    bot_name = policy.bot_name
    now = now or timezone.now()

    new_tokens = new_message.tokens if new_message.counted_by == counter.name else None
    if new_tokens is None:
        new_tokens = counter.count(new_message.content)
    ceiling = history_fetch_ceiling(
        packing,
        exact=counter.exact,
        new_message_tokens=new_tokens,
        counter_overhead=counter.message_overhead,
    )

    compaction_block: dict[str, Any] | None = None
    if needs.provider_compaction:
        # The provider's newest compaction stands for everything it covers.
        compaction = latest_compaction(conversation)
        summaries = [compaction[0]] if compaction is not None else []
        compaction_block = compaction[1] if compaction is not None else None
    elif needs.own_summaries:
        summaries = current_summaries(conversation, max_rolling=policy.max_summaries_in_context)
    else:
        summaries = []
    window_start = cached_window_start(conversation, policy, now)
    if compaction_block is not None and set(conversation.window_summary_ids) != {summaries[0].id}:
        window_start = None  # a new compaction: the history restarts after it
    elif window_start is not None and summaries:
        # The cached window shows the summaries it started with, and only those.
        pinned = set(conversation.window_summary_ids)
        kept = [s for s in summaries if s.id in pinned]
        if len(kept) == len(pinned):
            summaries = kept
        else:  # one was merged or deleted since: the window restarts
            window_start = None
    # The history starts after the newest summary of the kinds the strategy says stand for
    # the messages they cover (rolling summaries, the provider's compaction).
    after_seq = max((s.last_seq for s in summaries if s.kind in needs.history_after), default=0)
    recent, facts = selectors.recent_messages_and_facts(
        conversation,
        user_id=getattr(author, "pk", None),
        max_facts=policy.max_facts_per_user if policy.facts_enabled and needs.facts else 0,
        max_instructions=(
            policy.max_instructions_per_user if policy.instructions_enabled and needs.facts else 0
        ),
        before_seq=new_message.seq,
        after_seq=after_seq,
        limit=strategy.history_limit(policy),
        ceiling=ceiling,
        min_messages=packing.min_recent_messages,
        overhead=counter.message_overhead,
        bot_name=bot_name,
        labels=conversation.is_group,
        # A group chat's reply is read by every member: only shareable facts.
        shared=conversation.is_group,
    )
    retrieved: list[RetrievedItem] = []
    dense = DenseRetrieval.OFF
    if needs.retrieval and policy.retrieval_max_items > 0:
        # Everything before the new message is a candidate: history shows only what retrieval
        # leaves, and the core drops retrieved turns that history already shows.
        if new_message.seq > 1:
            shown = frozenset(int(s.id) for s in summaries if s.kind != "carried")
            if retriever is None:
                retrieved = retrieve_for_assembly(
                    conversation, new_message, policy, new_message.seq, shown, question=question
                )
            else:
                retrieved = retriever(conversation, new_message, policy, new_message.seq, shown)
            # After the call: a model that failed to load during it reads "unavailable".
            dense = dense_status(policy)
    instructions_ranked: list[Any] = []
    if needs.retrieval and dense_enabled(policy):
        # The standing instructions that concern the new message, for those the section
        # has no room for (the packing decides; the ranking is one query).
        instructions_ranked = instructions_for_message(
            conversation.tenant_id, facts, new_message.content, question
        )

    recalled: list[MessageItem] = []
    if window_start is not None and needs.retrieval and conversation.window_recalled_ids:
        recalled = recalled_items(conversation, conversation.window_recalled_ids, bot_name)
    members = conversation.participants.count() if conversation.is_group else 1
    variables = _system_variables(conversation, author, policy, now, members)
    pronouns = next((f.text for f in facts if f.key == "pronouns"), "")
    variables["user_pronouns"] = pronouns or "not set"
    inputs = AssemblyInputs(
        new_message=new_message,
        system_template=policy.system_prompt_template,
        variables=variables,
        facts=facts,
        summaries=summaries,
        retrieved=retrieved,
        recent=recent,
        multi_user=conversation.is_group,
        bot_name=bot_name,
        window_start_seq=window_start,
        recalled=recalled,
        recalled_excerpts=frozenset(conversation.window_excerpt_ids or ()),
        client_system=conversation.client_system,
        instructions_ranked=instructions_ranked,
    )
    prompt = assemble(packing, inputs, counter)
    system_tokens = prompt.section("system")
    hypothetical = (
        conversation.history_tokens
        + (system_tokens.used if system_tokens else 0)
        + (0 if new_message.seq <= conversation.last_seq else new_tokens)
    )
    return TurnContext(
        tenant_id=conversation.tenant_id,
        prompt=prompt,
        policy=policy,
        profile=profile,
        counter=counter,
        hypothetical_tokens=max(hypothetical, prompt.prompt_tokens),
        assembly_ms=(time.perf_counter() - started) * 1000,
        facts=facts,
        retrieved_ids=[r.message.id for r in retrieved],
        messages={
            m.id: m
            for m in (
                *recent,
                *recalled,
                *(n for r in retrieved for n in (r.message, *r.neighbors)),
            )
        },
        summaries=list(summaries),
        dense=dense,
        compaction_block=compaction_block,
    )


def message_content(content: str, note: str = "") -> str:
    """A message's text with ``note`` (e.g. what an image the model cannot see is) after it."""
    if not note:
        return content
    return f"{content}\n{note}" if content else note


def message_item(message: Message, author: Any = None, content_note: str = "") -> MessageItem:
    """The pure view of a stored message; ``content_note`` is appended to its text (and then
    counted afresh)."""
    content = message.content
    if message.tool_calls:
        content = tool_calls_text(content, message.tool_calls)
    return MessageItem(
        id=message.pk,
        seq=message.seq,
        role=message.role if message.role in ("user", "assistant", "tool") else "user",  # type: ignore[arg-type]
        content=message_content(content, content_note),
        author=person_label(
            getattr(author, "username", None),
            getattr(author, "first_name", None),
            getattr(author, "last_name", None),
        ),
        tokens=None if content_note else message.token_count,
        counted_by=None if content_note else message.token_counter or None,
        created_at=message.created_at,
        tool_group=message.tool_group,
    )


def assemble_turn(
    conversation: Conversation, message: Message, *, content_note: str = "", **kwargs: Any
) -> TurnContext:
    """Assemble the prompt answering the stored user ``message``."""
    author = message.author
    return assemble_context(
        conversation, message_item(message, author, content_note), author=author, **kwargs
    )
