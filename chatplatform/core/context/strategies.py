"""The context strategies, one registry entry each: what a strategy needs from the data, how
it packs the prompt, and what the admin form and the evaluations offer.

A tenant's policy picks one:

* sliding window: the recent history only; summaries and retrieved messages are left out;
* rolling summary: the summaries, then only the messages after the newest summary shown (at
  most ``raw_history_limit``);
* hybrid: the summaries, then older messages retrieved for the new message beside the
  recent history, within the retrieval budget;
* server compaction: the provider summarises the conversation itself when the prompt passes
  a trigger; the newest compaction it returned, then only the messages after it.

Every strategy takes the system prompt, the new message, the guaranteed recent messages and
the facts first (:mod:`.packing`); the window it fills is the sliding window's
(:mod:`.window`). Everything outside this module asks a strategy what it needs
(:attr:`ContextStrategy.needs`) through :func:`strategy_for`, never by comparing its name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from .budget import section_cap
from .draft import Draft
from .sections import WHOLE_REPLIES_SHARE, Picked, Retrieval, pick_retrieved, pick_summaries
from .truncate import MIN_CUT_TOKENS
from .types import (
    STRATEGY_NAMES,
    AssemblyInputs,
    Excluded,
    Included,
    PackingPolicy,
    RetrievedItem,
    StrategyName,
    SummaryKind,
    Truncation,
)
from .window import restart_size

#: The summaries the platform writes itself (rolling and periodic) and carries over from a
#: continued conversation: what the summary strategies show.
OWN_SUMMARY_KINDS: frozenset[SummaryKind] = frozenset({"rolling", "recent", "long", "carried"})
PERIODIC_SUMMARY_KINDS: frozenset[SummaryKind] = frozenset({"recent", "long"})


class UnknownStrategy(ValueError):
    """A strategy name that no registry entry has."""


@dataclass(frozen=True, slots=True)
class DataNeeds:
    """What a strategy's prompts show beside the recent history: what assembly fetches for it
    and what the background jobs keep up to date for it."""

    #: The kinds of summaries its prompts can show (``compaction``: the provider's own).
    summaries: frozenset[SummaryKind] = frozenset()
    #: Older messages retrieved for the new message (full-text).
    retrieval: bool = False
    #: Retrieval by meaning as well, where the policy asks for it.
    retrieval_by_meaning: bool = False
    #: The facts saved about the user.
    facts: bool = True
    #: The history starts after the newest summary of these kinds that the prompt shows.
    history_after: frozenset[SummaryKind] = frozenset()
    #: The history is at most the policy's ``raw_history_limit`` messages.
    raw_history_limit: bool = False

    @property
    def own_summaries(self) -> bool:
        """Whether it shows summaries the platform writes (assembly fetches the current ones)."""
        return bool(self.summaries & OWN_SUMMARY_KINDS)

    @property
    def rolling_summaries(self) -> bool:
        """Whether the rolling summary job works for it."""
        return "rolling" in self.summaries

    @property
    def periodic_summaries(self) -> bool:
        """Whether the periodic (recent and long) summary jobs work for it."""
        return bool(self.summaries & PERIODIC_SUMMARY_KINDS)

    @property
    def provider_compaction(self) -> bool:
        """Whether the provider compacts the conversation itself (requests ask it to, and its
        newest compaction stands for the messages it covers)."""
        return "compaction" in self.summaries


class HistoryLimits(Protocol):
    """The policy's history limits (a ``PackingPolicy`` or the policy model)."""

    @property
    def recent_message_cap(self) -> int: ...

    @property
    def raw_history_limit(self) -> int: ...


class ContextStrategy:
    """One registry entry. Packing: what every strategy does unless it says otherwise is the
    summaries that fit, then the history, restarted at the trim mark unless the cached window
    was kept."""

    name: ClassVar[StrategyName]
    #: The admin form's choice (stored values are ``name``).
    label: ClassVar[str]
    #: What it does, in one sentence for the admin form.
    help: ClassVar[str]
    #: Its name in sentences ("choose Hybrid").
    title: ClassVar[str]
    needs: ClassVar[DataNeeds]
    #: The label of the summaries section in the context meter, where it is not "Summaries".
    summaries_label: ClassVar[str | None] = None
    #: Offered by the recall evaluation (``eval_recall``) and the cost replay (``bench_cost``).
    in_recall_eval: ClassVar[bool] = True
    in_cost_replay: ClassVar[bool] = True

    def history_limit(self, policy: HistoryLimits) -> int:
        """The most history messages the prompt may show."""
        if self.needs.raw_history_limit:
            return min(policy.recent_message_cap, policy.raw_history_limit)
        return policy.recent_message_cap

    def history_span(self, policy: PackingPolicy, inputs: AssemblyInputs) -> tuple[int, int | None]:
        """The most history messages the prompt may show, and the seq they must come after
        (``None``: any)."""
        return self.history_limit(policy), None

    def issues(self, policy: PackingPolicy) -> list[tuple[str, str]]:
        """(field, message) for each of the policy's settings this strategy cannot work with."""
        if self.needs.raw_history_limit and policy.raw_history_limit < 1:
            return [
                (
                    "raw_history_limit",
                    f"the {self.title.lower()} strategy needs a raw history limit "
                    "of at least 1 (the messages not yet summarised)",
                )
            ]
        return []

    def add_summaries(
        self,
        d: Draft,
        policy: PackingPolicy,
        cap: int,
        excluded: list[Excluded],
        truncs: list[Truncation],
    ) -> None:
        """Put the summaries that fit in ``cap`` into the draft."""
        d.summaries = pick_summaries(
            d.inputs.summaries,
            cap,
            policy.max_summaries_in_context,
            d.meter,
            excluded,
            truncs,
            MIN_CUT_TOKENS,
        )

    def fill(
        self,
        draft: Draft,
        policy: PackingPolicy,
        *,
        room: int,
        facts_and_summaries: int,
        window_kept: bool,
        excluded: list[Excluded],
    ) -> None:
        """Fill what the facts and summaries (``facts_and_summaries`` tokens) leave of ``room``
        (the tokens after the system prompt, the new message and the turn's values): history,
        restarted at the trim mark unless the cached window was kept (``window_kept``);
        retrieved messages are left out."""
        excluded += [
            Excluded("retrieved", r.message.id, r.message.tokens, "strategy")
            for r in draft.inputs.retrieved
        ]
        if not window_kept:
            draft.history.extend(restart_size(draft, policy, room - facts_and_summaries))


class SlidingWindow(ContextStrategy):
    """The recent history only: summaries are left out too."""

    name = "sliding_window"
    label = "Sliding window (recent messages only)"
    title = "Sliding window"
    help = "Only the latest messages: the cheapest, and the model forgets what scrolled out."
    needs = DataNeeds()

    def add_summaries(
        self,
        d: Draft,
        policy: PackingPolicy,
        cap: int,
        excluded: list[Excluded],
        truncs: list[Truncation],
    ) -> None:
        excluded += [Excluded("summary", s.id, s.tokens, "strategy") for s in d.inputs.summaries]


class RollingSummary(ContextStrategy):
    """Summaries of the older conversation, then only the messages after the newest summary
    shown, at most ``raw_history_limit`` of them."""

    name = "rolling_summary"
    label = "Rolling summary (summaries + recent messages)"
    title = "Rolling summary"
    help = "Summaries of the older conversation, then the messages they do not cover yet."
    needs = DataNeeds(
        summaries=OWN_SUMMARY_KINDS,
        history_after=frozenset({"rolling"}),
        raw_history_limit=True,
    )

    def history_span(self, policy: PackingPolicy, inputs: AssemblyInputs) -> tuple[int, int | None]:
        limit = self.history_limit(policy)
        shown = policy.max_summaries_in_context > 0 and policy.summaries_budget > 0
        covered = [s.last_seq for s in inputs.summaries if s.kind != "carried" and shown]
        return limit, max(covered) if covered else None


class Hybrid(ContextStrategy):
    """Summaries, and older messages retrieved for the new message beside the recent history.

    Retrieval's share of the prompt: a new window takes the recalled messages first, within
    the retrieval budget and the trim mark, and they become part of the cached prefix; while
    the window is kept, this turn's own finds go after the new message, within
    ``turn_retrieval_percent`` of the retrieval budget and what the window leaves, the best
    hits the prompt already shows taking their share first (what they lack is added). When
    nothing was cached (no window to continue), the whole room the new window leaves goes to
    this turn's own finds, past the retrieval budget if need be: the prompt is written in full
    anyway, and room left empty there would buy nothing.
    """

    name = "hybrid"
    label = "Hybrid (summaries + retrieval + facts + recent messages)"
    title = "Hybrid"
    help = (
        "Summaries, and older messages that match the new one, beside the latest messages "
        "(retrieval by meaning only here)."
    )
    needs = DataNeeds(summaries=OWN_SUMMARY_KINDS, retrieval=True, retrieval_by_meaning=True)

    def fill(
        self,
        draft: Draft,
        policy: PackingPolicy,
        *,
        room: int,
        facts_and_summaries: int,
        window_kept: bool,
        excluded: list[Excluded],
    ) -> None:
        if window_kept:
            # The cached window stands; this turn's own finds go after the new message, within
            # the policy's share of the retrieval budget and what the window leaves; the best
            # hits already shown count against the share, so only what they lack is added.
            cap = section_cap(policy, policy.retrieval_budget, room)
            cap = min(
                cap * policy.turn_retrieval_percent // 100,
                room - facts_and_summaries - draft.window_used(),
            )
            draft.retrieval = _pick(
                draft, policy, draft.inputs.retrieved, cap, excluded, shown_count=True
            )
            return
        # A new window: recalled messages and history share the trim mark of the room, so
        # the next turns can append; the recalled block is part of the cached prefix.
        target = restart_size(draft, policy, room - facts_and_summaries)
        cap = min(section_cap(policy, policy.retrieval_budget, room), target - draft.history.used)
        cold = draft.inputs.window_start_seq is None
        # Nothing cached: the recalled block and this turn's own finds (below) share the
        # retrieval room, and so its whole replies' share: the best-ranked replies take it
        # first, in whichever of the two blocks they land.
        whole_room = (
            int(WHOLE_REPLIES_SHARE * section_cap(policy, policy.retrieval_budget, room))
            if cold
            else None
        )
        draft.recalled = _pick(
            draft, policy, draft.inputs.retrieved, max(0, cap), excluded, whole_room=whole_room
        )
        while True:
            draft.history.extend(target - draft.recalled.used)
            if not draft.recalled.entries or not draft.recalled.remove(
                draft.history.ids(), excluded
            ):
                break
        if cold:
            # Nothing was cached (a first turn, or a pause longer than the cache lives), so
            # this prompt is written in full anyway: the window stays at the trim mark, for
            # the next turns to append to, and this turn's own finds take all the room it
            # leaves, after the new message. Bounded by the retrieval budget, that room stayed
            # empty whenever the budget was smaller than what the trim mark leaves, exactly
            # when nothing is saved by leaving it.
            cap = room - facts_and_summaries - draft.window_used()
            left = None
            if whole_room is not None:
                left = max(0, whole_room - sum(draft.recalled.whole.values()))
            draft.retrieval = _pick(
                draft, policy, draft.inputs.retrieved, max(0, cap), excluded, whole_room=left
            )


def _pick(
    d: Draft,
    policy: PackingPolicy,
    items: Sequence[RetrievedItem],
    cap: int,
    excluded: list[Excluded],
    *,
    shown_count: bool = False,
    whole_room: int | None = None,
) -> Retrieval:
    """Retrieved messages within ``cap``, none that the prompt already shows (``shown_count``:
    those it shows still take their tokens from ``cap``, :func:`pick_retrieved`);
    ``whole_room``: what whole replies may fill (default: their share of ``cap``)."""
    skip = d.history.ids() | d.recalled.entries.keys() | {d.inputs.new_message.id}
    return pick_retrieved(
        items,
        cap,
        policy.retrieval_max_items,
        policy.retrieval_neighbors,
        skip,
        d.meter,
        d.inputs.bot_name,
        excluded,
        shown_count=shown_count,
        excerpt_tokens=policy.reply_excerpt_tokens,
        whole_replies=WHOLE_REPLIES_SHARE if policy.reply_excerpt_tokens else None,
        whole_room=whole_room if policy.reply_excerpt_tokens else None,
    )


class ServerCompaction(ContextStrategy):
    """The provider's own compaction (Anthropic's ``compact_20260112``): the newest compaction
    block it returned, then only the messages after the messages it covers. The block goes to
    the provider as it came (a content block before the history, not system text), so it is
    accounted in the summaries section and rendered by the provider request, not here; other
    summaries and retrieved messages are left out. The history is the sliding window's: it
    restarts at the trim mark and grows by appending, so the provider's trigger (above the trim
    mark) is reached while the cached prefix stands; a provider that does not compact leaves
    a plain sliding window."""

    name = "server_compaction"
    label = "Server compaction (the provider summarises the conversation itself + recent messages)"
    title = "Server compaction"
    help = (
        "The provider summarises the conversation itself when the prompt grows past its "
        "trigger (models that report it only); no summaries of ours are made or shown."
    )
    #: Only the provider's compaction: no rolling or periodic summaries are made for it.
    needs = DataNeeds(summaries=frozenset({"compaction"}), history_after=frozenset({"compaction"}))
    summaries_label = "Compaction (by the provider)"
    #: The recall evaluation makes no provider calls, so it would measure a sliding window.
    in_recall_eval = False

    def history_span(self, policy: PackingPolicy, inputs: AssemblyInputs) -> tuple[int, int | None]:
        covered = [s.last_seq for s in inputs.summaries if s.kind == "compaction"]
        return policy.recent_message_cap, max(covered) if covered else None

    def add_summaries(
        self,
        d: Draft,
        policy: PackingPolicy,
        cap: int,
        excluded: list[Excluded],
        truncs: list[Truncation],
    ) -> None:
        newest = max(
            (s for s in d.inputs.summaries if s.kind == "compaction"),
            key=lambda s: s.last_seq,
            default=None,
        )
        excluded += [
            Excluded("summary", s.id, s.tokens, "strategy")
            for s in d.inputs.summaries
            if s is not newest
        ]
        if newest is None:
            return
        # Never cut: the provider only accepts the block as it returned it.
        tokens = d.meter.stored("summary", newest.id, newest.text, newest.tokens, newest.counted_by)
        if tokens > cap:
            excluded.append(Excluded("summary", newest.id, tokens, "over_budget"))
            return
        d.summaries = Picked("summaries", cap, used=tokens)
        d.summaries.included.append(Included("summary", newest.id, tokens))
        d.outside_tokens = tokens


#: The registry, in the order the admin form offers them.
STRATEGIES: tuple[ContextStrategy, ...] = (
    SlidingWindow(),
    RollingSummary(),
    Hybrid(),
    ServerCompaction(),
)
_BY_NAME: dict[str, ContextStrategy] = {s.name: s for s in STRATEGIES}


def strategy_for(name: str) -> ContextStrategy:
    """The strategy a policy names; :class:`UnknownStrategy` for a name no entry has."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise UnknownStrategy(
            f"strategy {name!r} is unknown: pick one of {STRATEGY_NAMES}"
        ) from None


def strategy_names(
    where: Callable[[ContextStrategy], bool] = lambda s: True,
) -> tuple[StrategyName, ...]:
    """The names of the strategies ``where`` accepts, in the registry's order."""
    return tuple(s.name for s in STRATEGIES if where(s))


def strategy_choices() -> list[tuple[str, str]]:
    """(stored value, label) of every strategy: the policy model's choices."""
    return [(s.name, s.label) for s in STRATEGIES]
