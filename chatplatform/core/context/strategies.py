"""The context strategies: what each adds to the prompt beside the recent history.

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
(:mod:`.window`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from .budget import section_cap
from .draft import Draft
from .sections import Picked, Retrieval, pick_retrieved, pick_summaries
from .truncate import MIN_CUT_TOKENS
from .types import (
    AssemblyInputs,
    Excluded,
    Included,
    PackingPolicy,
    RetrievedItem,
    Truncation,
)
from .window import restart_size


class Strategy:
    """What every strategy does unless it says otherwise: the summaries that fit, then the
    history, restarted at the trim mark unless the cached window was kept."""

    name: ClassVar[str]

    def history_span(self, policy: PackingPolicy, inputs: AssemblyInputs) -> tuple[int, int | None]:
        """The most history messages the prompt may show, and the seq they must come after
        (``None``: any)."""
        return policy.recent_message_cap, None

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


class SlidingWindow(Strategy):
    """The recent history only: summaries are left out too."""

    name = "sliding_window"

    def add_summaries(
        self,
        d: Draft,
        policy: PackingPolicy,
        cap: int,
        excluded: list[Excluded],
        truncs: list[Truncation],
    ) -> None:
        excluded += [Excluded("summary", s.id, s.tokens, "strategy") for s in d.inputs.summaries]


class RollingSummary(Strategy):
    """Summaries of the older conversation, then only the messages after the newest summary
    shown, at most ``raw_history_limit`` of them."""

    name = "rolling_summary"

    def history_span(self, policy: PackingPolicy, inputs: AssemblyInputs) -> tuple[int, int | None]:
        limit = min(policy.recent_message_cap, policy.raw_history_limit)
        shown = policy.max_summaries_in_context > 0 and policy.summaries_budget > 0
        covered = [s.last_seq for s in inputs.summaries if s.kind != "carried" and shown]
        return limit, max(covered) if covered else None


class Hybrid(Strategy):
    """Summaries, and older messages retrieved for the new message beside the recent history.

    Retrieval's share of the prompt: a new window takes the recalled messages first, within
    the retrieval budget and the trim mark, and they become part of the cached prefix; while
    the window is kept, this turn's own finds go after the new message, within
    ``turn_retrieval_percent`` of the retrieval budget and what the window leaves.
    """

    name = "hybrid"

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
            # the policy's share of the retrieval budget and what the window leaves.
            cap = section_cap(policy, policy.retrieval_budget, room)
            cap = min(
                cap * policy.turn_retrieval_percent // 100,
                room - facts_and_summaries - draft.window_used(),
            )
            draft.retrieval = _pick(draft, policy, draft.inputs.retrieved, cap, excluded)
            return
        # A new window: recalled messages and history share the trim mark of the room, so
        # the next turns can append; the recalled block is part of the cached prefix.
        target = restart_size(draft, policy, room - facts_and_summaries)
        cap = min(section_cap(policy, policy.retrieval_budget, room), target - draft.history.used)
        draft.recalled = _pick(draft, policy, draft.inputs.retrieved, max(0, cap), excluded)
        while True:
            draft.history.extend(target - draft.recalled.used)
            if not draft.recalled.entries or not draft.recalled.remove(
                draft.history.ids(), excluded
            ):
                break


def _pick(
    d: Draft,
    policy: PackingPolicy,
    items: Sequence[RetrievedItem],
    cap: int,
    excluded: list[Excluded],
) -> Retrieval:
    """Retrieved messages within ``cap``, none that the prompt already shows."""
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
    )


class ServerCompaction(Strategy):
    """The provider's own compaction (Anthropic's ``compact_20260112``): the newest compaction
    block it returned, then only the messages after the messages it covers. The block goes to
    the provider as it came (a content block before the history, not system text), so it is
    accounted in the summaries section and rendered by the provider request, not here; other
    summaries and retrieved messages are left out. The history is the sliding window's: it
    restarts at the trim mark and grows by appending, so the provider's trigger (above the trim
    mark) is reached while the cached prefix stands; a provider that does not compact leaves
    a plain sliding window."""

    name = "server_compaction"

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


_BY_NAME: dict[str, Strategy] = {
    s.name: s for s in (SlidingWindow(), RollingSummary(), Hybrid(), ServerCompaction())
}


def strategy_for(name: str) -> Strategy:
    """The strategy a policy names (``check_policy`` has made sure it is one of them)."""
    return _BY_NAME[name]
