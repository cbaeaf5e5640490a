"""Data types of the pure context-assembly core. Nothing here imports Django.

Units: every ``tokens`` / ``*_budget`` value is a number of tokens as counted by the
:class:`~chatplatform.core.tokens.base.TokenCounter` the assembly runs with, unless the field
says it is a percent. Stored counts (``tokens``) cover the item's raw ``text``/``content``
only, without any per-message overhead; ``counted_by`` names the counter that produced
them, and a count made by another counter (or ``None``) is recounted during assembly and
reported in :attr:`AssembledPrompt.recounted` so the caller can backfill it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, NamedTuple

#: The stored name of a context strategy; each has one registry entry in :mod:`.strategies`.
StrategyName = Literal["sliding_window", "rolling_summary", "hybrid", "server_compaction"]
BudgetUnit = Literal["tokens", "percent"]
SummaryKind = Literal["rolling", "recent", "long", "carried", "compaction"]
Role = Literal["user", "assistant", "tool"]
ItemId = int | str

STRATEGY_NAMES: tuple[StrategyName, ...] = (
    "sliding_window",
    "rolling_summary",
    "hybrid",
    "server_compaction",
)
#: The default preset's strategy.
DEFAULT_STRATEGY: StrategyName = "hybrid"
BUDGET_UNITS: tuple[BudgetUnit, ...] = ("tokens", "percent")
OversizedMessage = Literal["cut", "whole"]
#: Summary kinds that change rarely: they sit in the cacheable (stable) prefix of ``system``.
STABLE_SUMMARY_KINDS: frozenset[str] = frozenset({"carried", "long", "recent"})


#: A recalled reply's head (:attr:`PackingPolicy.reply_excerpt_tokens`): measured on long
#: conversations (``docs/retrieval.md``), where replies run six times their questions' length.
DEFAULT_REPLY_EXCERPT_TOKENS = 100


@dataclass(frozen=True, slots=True)
class PackingPolicy:
    """A tenant's context policy, as far as assembly is concerned.

    ``usable prompt budget = min(max_context_tokens, context_window) - reserved_response_tokens``
    (real tokens). When the counter is not exact, counted totals are multiplied by
    ``safety_margin_ratio * calibration_ratio`` before they are compared with that budget.

    Section budgets (``system_budget`` … ``retrieval_budget``) are caps: what a section
    leaves unused flows to the recent history. With ``budget_unit == "percent"`` they are
    whole percents (0-100): the system budget of the prompt budget left after framing, the
    others of what is left after the system prompt, the new message and framing.
    """

    strategy: StrategyName = DEFAULT_STRATEGY
    context_window: int = 200_000
    max_context_tokens: int = 200_000
    reserved_response_tokens: int = 4_096
    safety_margin_ratio: float = 1.0
    #: Online calibration of an inexact counter against the provider's reported prompt
    #: tokens: real tokens expected per counted token, bounded above (1.0 = uncalibrated;
    #: below 1 when the model counts fewer tokens than the estimate). It multiplies
    #: ``safety_margin_ratio``; exact counters ignore both.
    calibration_ratio: float = 1.0
    budget_unit: BudgetUnit = "tokens"
    system_budget: int = 8_000
    #: The user's standing instructions and preferences (sent before the facts).
    instructions_budget: int = 0
    facts_budget: int = 2_000
    summaries_budget: int = 6_000
    retrieval_budget: int = 8_000
    min_recent_messages: int = 20
    recent_message_cap: int = 100
    max_summaries_in_context: int = 3
    raw_history_limit: int = 100
    max_facts: int = 50
    max_instructions: int = 30
    retrieval_max_items: int = 8
    retrieval_neighbors: int = 1
    #: A retrieved reply shown for its exchange (found through the message it answers, not
    #: by its own words) goes as its first this many tokens when longer: the user's own
    #: words stay whole and the room goes to more of them. 0: replies go whole.
    reply_excerpt_tokens: int = DEFAULT_REPLY_EXCERPT_TOKENS
    #: Tokens of provider framing per message; ``None`` = the counter's ``message_overhead``.
    per_message_overhead: int | None = None
    #: Tokens the provider adds once per prompt to prime the reply.
    reply_primer_tokens: int = 3
    #: Shown in validation errors ("... of model M").
    model_name: str = ""
    #: When the history window must restart (it no longer fits, or there is no cached window
    #: to continue), it restarts at this percent of its room, so that the next turns only
    #: append to it and the provider reads it from its prompt cache. 100: fill the room.
    history_trim_percent: int = 100
    #: While the cached window is kept, a turn's own retrieved messages (sent after the new
    #: message, outside the cache) take at most this percent of the retrieval budget.
    turn_retrieval_percent: int = 100
    #: The model's minimum cacheable prompt: a new window never starts so small that the
    #: prompt up to its end is shorter (0: no minimum).
    cache_min_tokens: int = 0
    #: A new message larger than the prompt budget leaves room for: ``cut`` (head and tail
    #: kept, a visible marker between) or ``whole`` (the prompt grows past
    #: ``max_context_tokens`` just enough to send it whole, while the model's window holds it;
    #: cut only beyond that).
    oversized_message: OversizedMessage = "cut"


@dataclass(frozen=True, slots=True)
class SystemPart:
    """An already rendered system prompt."""

    text: str
    tokens: int | None = None
    counted_by: str | None = None


@dataclass(frozen=True, slots=True)
class FactItem:
    """A stored memory of the user: a fact (``key``, if any, deduplicates facts), or a
    standing instruction or preference (``kind``, a name of
    :mod:`chatplatform.core.memory.kinds`; its entry says which section it goes to)."""

    id: ItemId
    text: str
    key: str | None = None
    tokens: int | None = None
    counted_by: str | None = None
    kind: str = "fact"
    #: A fact whose value changed: the value it replaced and the date (``YYYY-MM-DD``) the
    #: new one was said; a turn whose message concerns it is told of the change.
    previous: str | None = None
    since: str | None = None


@dataclass(frozen=True, slots=True)
class SummaryItem:
    """A summary covering messages ``first_seq..last_seq`` (inclusive) of the conversation.

    ``carried`` summaries come from an earlier conversation; their seq range refers to it.
    """

    id: ItemId
    kind: SummaryKind
    text: str
    first_seq: int
    last_seq: int
    tokens: int | None = None
    counted_by: str | None = None
    created_at: datetime | None = None
    first_at: datetime | None = None
    last_at: datetime | None = None


class MessageItem(NamedTuple):
    """One stored message (immutable).

    ``author`` is the display label: ``"Full Name (@username)"`` for people, the bot's name
    for assistant turns; it may be empty where no label is shown (people's turns in the
    history of a private chat). ``tokens`` counts ``content`` only (``None`` = unknown/legacy).
    Messages sharing a ``tool_group`` (a tool call and its results) are kept or dropped
    together; a group missing its call or its result is left out.

    A named tuple rather than a frozen dataclass: a turn builds hundreds of them, and a
    tuple is built four times faster (a frozen dataclass sets each field through
    ``object.__setattr__``). Compare items by ``id``, not by ``==``.
    """

    id: ItemId
    seq: int
    role: Role
    content: str
    author: str = ""
    tokens: int | None = None
    counted_by: str | None = None
    created_at: datetime | None = None
    reply_to_excerpt: str | None = None
    tool_group: str | None = None


@dataclass(frozen=True, slots=True)
class RetrievedItem:
    """A message retrieved as relevant to the new message, with adjacent turns.

    ``neighbors`` are messages around ``message`` (any order); the policy's
    ``retrieval_neighbors`` limits how many on each side are used. ``excerpt``: the message
    is shown for its exchange only (a reply found through the message it answers), so the
    policy's ``reply_excerpt_tokens`` may shorten it to its head.
    """

    message: MessageItem
    score: float = 0.0
    neighbors: tuple[MessageItem, ...] = ()
    excerpt: bool = False


@dataclass(frozen=True, slots=True)
class AssemblyInputs:
    """Everything the caller fetched for one turn (bounded queries, newest first for history).

    The system prompt is ``system`` when given, else ``system_template`` rendered with
    ``variables`` (see :mod:`.template`). ``facts`` and ``retrieved`` come in the
    caller's relevance order. ``recent`` is newest first and may include ``new_message``
    itself (it is skipped).
    """

    new_message: MessageItem
    system: SystemPart | None = None
    system_template: str | None = None
    variables: Mapping[str, object] = field(default_factory=dict)
    facts: Sequence[FactItem] = ()
    summaries: Sequence[SummaryItem] = ()
    retrieved: Sequence[RetrievedItem] = ()
    recent: Sequence[MessageItem] = ()
    multi_user: bool = False
    bot_name: str = "Assistant"
    #: The seq of the oldest message of the history window the provider still has cached
    #: (``None``: no such window; the history restarts at the policy's trim mark). The
    #: window is kept whole while it fits, so the prompt's prefix stays what was cached.
    window_start_seq: int | None = None
    #: The retrieved messages the cached window holds (chosen when it started), which are
    #: sent again, unchanged, while the window is kept.
    recalled: Sequence[MessageItem] = ()
    #: The ids of ``recalled`` messages the window shows as excerpts.
    recalled_excerpts: frozenset[ItemId] = frozenset()
    #: An SDK client's own system prompt (the SDK-compatible API): framed as data after the
    #: platform's system prompt, within the system section's budget.
    client_system: str = ""
    #: The ids of the user's standing instructions and preferences that concern the new
    #: message most, best first (the caller ranks them by meaning): those the instructions
    #: section has no room for go with this turn, after the new message.
    instructions_ranked: Sequence[ItemId] = ()


class Included(NamedTuple):
    """An item that went into the prompt, with the tokens accounted for it."""

    kind: str
    id: ItemId
    tokens: int


class Excluded(NamedTuple):
    """An item left out, and why: ``over_budget`` (did not fit, or not reached by the walk),
    ``window_trim`` (would have fit, but the history window restarted at its trim mark),
    ``duplicate``, ``cap`` (a count limit), ``outside_window`` (covered by a summary),
    ``incomplete_tool_group``, ``empty``, ``strategy`` (the strategy does not use it) or
    ``recount`` (shed by the final recount check). ``tokens`` may be ``None``: items not
    reached are never counted."""

    kind: str
    id: ItemId
    tokens: int | None
    reason: str


class Truncation(NamedTuple):
    """An item cut to fit: ``kind`` is ``system``, ``new_message``, ``summary`` or
    ``message``; ``excerpt`` is a retrieved reply shown as its head
    (``reply_excerpt_tokens``)."""

    kind: str
    id: ItemId
    original_tokens: int
    kept_tokens: int


@dataclass(frozen=True, slots=True)
class SectionUsage:
    """Tokens a section could use (``budget``) and used, and how many items it holds."""

    name: str
    budget: int
    used: int
    items: int


@dataclass(frozen=True, slots=True)
class StablePrefix:
    """``system[:chars]`` changes rarely (system prompt and long-lived summaries).

    A provider adapter may mark it cacheable (e.g. Anthropic ``cache_control`` on a first
    system block holding exactly that prefix). ``tokens`` is its count under the counter.
    """

    chars: int
    tokens: int


@dataclass(frozen=True, slots=True)
class AssembledPrompt:
    """The prompt for one turn.

    ``messages`` alternate user/assistant and start and end with a user turn.
    ``prompt_tokens`` = count(system) + overhead (when ``system`` is non-empty)
    + sum(count(content) + overhead) + reply primer, recounted on this exact output;
    ``ceil(prompt_tokens * margin_ratio) <= budget`` always holds.
    """

    system: str
    messages: list[dict[str, str]]
    sections: tuple[SectionUsage, ...]
    included: tuple[Included, ...]
    excluded: tuple[Excluded, ...]
    truncated: tuple[Truncation, ...]
    recounted: tuple[Included, ...]
    stable_prefix: StablePrefix
    prompt_tokens: int
    budget: int
    counted_limit: int
    margin_ratio: float
    counter_name: str
    strategy: StrategyName
    #: Number of history messages dropped by the final recount check (normally 0).
    trimmed_after_recount: int = 0
    #: The content blocks of each message of ``messages`` (one per turn; the last message's
    #: last block is ``tail`` when there is one): ``TURN_SEPARATOR.join(blocks[i]) ==
    #: messages[i]["content"]``. Providers that cache prompt prefixes mark block boundaries.
    blocks: tuple[tuple[str, ...], ...] = ()
    #: The message behind each of ``blocks`` (``None``: the tail, a synthetic start) when the
    #: prompt holds tool calls or their results (empty otherwise): the provider request sends
    #: those blocks as the calls and results themselves.
    block_ids: tuple[tuple[ItemId | None, ...], ...] = ()
    #: What was chosen for this turn alone (per-turn values, retrieved messages, a group
    #: chat's author's facts), framed as data after the new message, outside the cached prefix.
    tail: str = ""
    #: Tokens of ``tail`` with its separator (what follows the new message).
    tail_tokens: int = 0
    #: The seq of the oldest history message sent (the window the next turn continues);
    #: ``None`` when no history was sent.
    window_start_seq: int | None = None
    #: Whether the history continued the cached window (False: it restarted).
    window_kept: bool = False
    #: The ids of the retrieved messages in the cached window (chronological).
    recalled_ids: tuple[ItemId, ...] = ()
    #: Those of ``recalled_ids`` shown as excerpts: the window's later turns show them so.
    recalled_excerpt_ids: tuple[ItemId, ...] = ()
    #: Tokens the prompt was allowed past the policy's ``max_context_tokens`` to send an
    #: oversized new message whole (``oversized_message == "whole"``); 0 otherwise.
    widened_by: int = 0

    @property
    def summary_ids(self) -> list[ItemId]:
        """The ids of the summaries the prompt shows."""
        return [i.id for i in self.included if i.kind == "summary"]

    @property
    def new_message_truncated(self) -> bool:
        return any(t.kind == "new_message" for t in self.truncated)

    @property
    def system_truncated(self) -> bool:
        return any(t.kind == "system" for t in self.truncated)

    def section(self, name: str) -> SectionUsage | None:
        """The usage of section ``name`` (system, facts, summaries, retrieval, history,
        new_message, framing), or ``None``."""
        return next((s for s in self.sections if s.name == name), None)
