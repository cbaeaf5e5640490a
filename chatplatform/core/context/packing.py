"""``assemble(policy, inputs, counter)``: the prompt for one turn, inside the budget.

Order of claims (all in counted tokens, see :mod:`chatplatform.core.context.budget`):

1. framing (reply primer, system and new-message overheads);
2. the system prompt, capped by its budget (tail cut with a marker when longer);
3. the new message, which takes what it needs of the rest; one larger than that is cut
   head-and-tail with a visible marker, never sent whole and never dropped;
4. the last ``min_recent_messages`` (whole tool-group units, newest first) if they fit;
5. user facts, then summaries (not in ``sliding_window``), then retrieved messages (only in
   ``hybrid``), each within its cap and within what is left;
6. recent history gets everything left, walked newest to oldest and stopped at the first
   unit that does not fit (``rolling_summary``: only messages after the newest summary, at
   most ``raw_history_limit``); retrieved messages that history already shows are dropped
   and the freed tokens go to history; if not even the newest message fits, it is cut.

Placement: ``system`` = system prompt, long-lived summaries (the cacheable stable prefix),
then rolling summaries, the fenced facts block and the fenced retrieved block; ``messages`` =
history in chronological order and the new message, as alternating user/assistant turns.

The guarantee: the output is recounted (system + messages + overheads + primer); while
``ceil(total * margin) > usable`` (joins and merges can tokenize differently from the parts)
the oldest history is dropped, then retrieval, summaries, facts, then the larger of system
prompt and new message is cut further. ``trimmed_after_recount`` reports it; it is 0 in
practice because per-item accounting is conservative.

Work: counts are taken only for items that reach the walk and lack a stored count by this
counter, for short prefixes, and once on the final output; a text is tokenized once per
process while turns keep using it (:class:`~.history.CountMemo`), so the final
recount of a turn tokenizes only what the previous turns did not already send. Per message,
the common case is a handful of C-level passes over columns (see
:class:`~chatplatform.core.context.history.History`).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from operator import attrgetter, gt, itemgetter
from typing import TYPE_CHECKING, Any

from .budget import check_policy, plan_budget, section_cap, system_cap
from .draft import Draft, fit
from .formatting import (
    USER_MEMORIES_POINTER,
)
from .history import (
    CONTENT,
    ID,
    SEQ,
    TOOL_GROUP,
    History,
    Meter,
    drop_incomplete_groups,
    transpose,
)
from .sections import (
    SEPARATOR_TOKENS,
    Retrieval,
    pick_facts,
    pick_retrieved,
    pick_summaries,
)
from .template import PER_TURN_POINTER, per_turn_names, render_template, turn_values_block
from .types import (
    AssembledPrompt,
    AssemblyInputs,
    Excluded,
    Included,
    MessageItem,
    PackingPolicy,
    RetrievedItem,
    SectionUsage,
    StablePrefix,
    Truncation,
)

if TYPE_CHECKING:
    from chatplatform.core.tokens.base import TokenCounter

_seq = attrgetter("seq")
_content_of = itemgetter("content")

#: Smallest room worth cutting a summary or history message into.
MIN_CUT_TOKENS = 48
#: Kept above the model's minimum cacheable length: our count and the provider's differ.
CACHE_MIN_SLACK = 64


def _system_text(inputs: AssemblyInputs, has_facts: bool, meter: Meter) -> tuple[str, int, str]:
    """The system prompt, its tokens, and the block of this turn's values it points to."""
    if inputs.system is not None:
        s = inputs.system
        return s.text, meter.stored("system", "system", s.text, s.tokens, s.counted_by), ""
    if not inputs.system_template:
        return "", 0, ""
    values = dict(inputs.variables)
    values["user_memories"] = USER_MEMORIES_POINTER if has_facts else "(none stored)"
    values.setdefault("botname", inputs.bot_name)
    per_turn = per_turn_names(inputs.system_template, inputs.multi_user)
    block = turn_values_block(per_turn, values)
    text = render_template(
        inputs.system_template, {**values, **dict.fromkeys(per_turn, PER_TURN_POINTER)}
    )
    return text, meter.text(text), block


def _history_candidates(
    policy: PackingPolicy, inputs: AssemblyInputs, excluded: list[Excluded]
) -> tuple[list[MessageItem], list[tuple[Any, ...]] | None]:
    """History candidates, newest first, and their columns (``transpose``) when at hand."""
    new = inputs.new_message
    limit = policy.recent_message_cap
    after = None
    if policy.strategy == "rolling_summary":
        limit = min(limit, policy.raw_history_limit)
        shown = policy.max_summaries_in_context > 0 and policy.summaries_budget > 0
        covered = [s.last_seq for s in inputs.summaries if s.kind != "carried" and shown]
        after = max(covered) if covered else None
    new_id = new.id
    if after is None and len(inputs.recent) <= limit:
        # The common case, hundreds of messages per turn, in C-level passes over columns:
        # already newest first (as the caller gives them), without the new message, none
        # empty, no tool groups: all of them are candidates.
        columns = transpose(inputs.recent)
        seqs, contents, groups = columns[SEQ], columns[CONTENT], columns[TOOL_GROUP]
        if (
            all(map(gt, seqs, islice(seqs, 1, None)))
            and new_id not in columns[ID]
            and all(contents)
            and not any(map(str.isspace, contents))
            and groups.count(None) == len(groups)
        ):
            return list(inputs.recent), columns
    out: list[MessageItem] = []
    append = out.append
    for m in sorted(inputs.recent, key=_seq, reverse=True):
        if m.id == new_id:
            continue
        if after is not None and m.seq <= after:
            excluded.append(Excluded("message", m.id, m.tokens, "outside_window"))
        elif len(out) >= limit:
            excluded.append(Excluded("message", m.id, m.tokens, "cap"))
        elif not m.content or m.content.isspace():
            excluded.append(Excluded("message", m.id, m.tokens, "empty"))
        else:
            append(m)
    return drop_incomplete_groups(out, excluded), None


def assemble(
    policy: PackingPolicy, inputs: AssemblyInputs, counter: TokenCounter
) -> AssembledPrompt:
    """Build the prompt for ``inputs.new_message`` under ``policy``, counted with ``counter``.

    Raises :class:`~chatplatform.core.context.budget.PolicyError` for an invalid policy and
    ``ValueError`` when the new message is an assistant turn.
    """
    check_policy(policy, exact=counter.exact, counter_overhead=counter.message_overhead)
    if inputs.new_message.role == "assistant":
        raise ValueError("the new message must be a user or tool turn")
    plan = plan_budget(policy, exact=counter.exact, counter_overhead=counter.message_overhead)
    meter = Meter(counter, plan.overhead)
    excluded: list[Excluded] = []
    candidates, columns = _history_candidates(policy, inputs, excluded)
    d = Draft(plan, meter, inputs, History(candidates, meter, inputs.multi_user, columns))

    has_facts = bool(inputs.facts) and policy.max_facts > 0
    d.system_full, system_full_tokens, d.turn_values = _system_text(inputs, has_facts, meter)
    d.cut_system(d.system_full, system_full_tokens, system_cap(policy, plan))
    if d.turn_values:
        d.turn_values_tokens = meter.text(d.turn_values) + SEPARATOR_TOKENS
    d.set_new()
    rest = plan.room - d.system_tokens - d.new_tokens - d.turn_values_tokens

    d.history.extend(rest, max_messages=policy.min_recent_messages)
    avail = rest - d.history.used

    cap = min(section_cap(policy, policy.facts_budget, rest), avail)
    d.facts = pick_facts(inputs.facts, cap, policy.max_facts, meter, excluded)
    avail -= d.facts.used
    truncs: list[Truncation] = []
    if policy.strategy == "sliding_window":
        excluded += [Excluded("summary", s.id, s.tokens, "strategy") for s in inputs.summaries]
    else:
        cap = min(section_cap(policy, policy.summaries_budget, rest), avail)
        d.summaries = pick_summaries(
            inputs.summaries,
            cap,
            policy.max_summaries_in_context,
            meter,
            excluded,
            truncs,
            MIN_CUT_TOKENS,
        )
        avail -= d.summaries.used
    fixed = d.facts.used + d.summaries.used
    hybrid = policy.strategy == "hybrid"
    if not hybrid:
        excluded += [
            Excluded("retrieved", r.message.id, r.message.tokens, "strategy")
            for r in inputs.retrieved
        ]
    kept = _keep_window(d, policy, rest - fixed, excluded)
    if kept and hybrid:
        # The cached window stands; this turn's own finds go after the new message, within
        # the policy's share of the retrieval budget and what the window leaves.
        cap = section_cap(policy, policy.retrieval_budget, rest)
        cap = min(cap * policy.turn_retrieval_percent // 100, rest - fixed - d.window_used())
        d.retrieval = _pick(d, policy, inputs.retrieved, cap, excluded)
    elif hybrid:
        # A new window: recalled messages and history share the trim mark of the room, so
        # the next turns can append; the recalled block is part of the cached prefix.
        target = _restart_size(d, policy, rest - fixed)
        cap = min(section_cap(policy, policy.retrieval_budget, rest), target - d.history.used)
        d.recalled = _pick(d, policy, inputs.retrieved, max(0, cap), excluded)
        while True:
            d.history.extend(target - d.recalled.used)
            if not d.recalled.entries or not d.recalled.remove(d.history.ids(), excluded):
                break
    elif not kept:
        d.history.extend(_restart_size(d, policy, rest - fixed))
    history_room = rest - fixed - d.recalled.used - d.retrieval.used
    if not d.history.count:
        cut = d.history.truncate_newest(history_room, MIN_CUT_TOKENS)
        if cut is not None:
            truncs.append(cut)
    excluded += [Excluded("message", m.id, m.tokens, "over_budget") for m in d.history.untaken()]

    out, total, trimmed = fit(d, excluded)
    sections = (
        SectionUsage("framing", plan.framing, plan.framing, 0),
        SectionUsage(
            "system",
            system_cap(policy, plan),
            d.system_tokens + d.turn_values_tokens,
            int(bool(d.system)),
        ),
        SectionUsage("new_message", plan.room - d.system_tokens, d.new_tokens, 1),
        SectionUsage("facts", d.facts.budget, d.facts.used, len(d.facts.included)),
        SectionUsage("summaries", d.summaries.budget, d.summaries.used, len(d.summaries.included)),
        SectionUsage(
            "retrieval",
            d.recalled.cap + d.retrieval.cap,
            d.recalled.used + d.retrieval.used,
            len(d.recalled.entries) + len(d.retrieval.entries),
        ),
        SectionUsage("history", history_room, d.history.used, d.history.messages),
    )
    included = [Included("system", "system", d.system_tokens)] if d.system else []
    history_items = d.history.included()
    included += [
        *d.facts.included,
        *d.summaries.included,
        *d.recalled.included(),
        *d.retrieval.included(),
        *history_items,
        Included("new_message", inputs.new_message.id, d.new_tokens),
    ]
    return AssembledPrompt(
        system=out.system,
        messages=out.messages,
        sections=sections,
        included=tuple(included),
        excluded=tuple(excluded),
        truncated=tuple([*d.cuts.values(), *truncs]),
        recounted=tuple(meter.recounted),
        stable_prefix=StablePrefix(len(out.system), meter.text(out.system) if out.system else 0),
        prompt_tokens=total,
        budget=plan.usable,
        counted_limit=plan.limit,
        margin_ratio=plan.margin_ratio,
        counter_name=counter.name,
        strategy=policy.strategy,
        trimmed_after_recount=trimmed,
        blocks=out.blocks,
        tail=out.tail,
        tail_tokens=meter.text(out.tail) + SEPARATOR_TOKENS if out.tail else 0,
        window_start_seq=d.history.oldest_seq(),
        window_kept=kept and not trimmed,
        recalled_ids=tuple(sorted(d.recalled.entries, key=lambda i: d.recalled.entries[i][0].seq)),
    )


def _restart_size(d: Draft, policy: PackingPolicy, room: int) -> int:
    """The size a new window starts at: the trim mark of its ``room``, but never so small
    that the prompt up to the window's end falls below the model's minimum cacheable length
    (the provider would cache nothing of it), as far as the room allows."""
    size = room * policy.history_trim_percent // 100
    if policy.cache_min_tokens:
        before = d.plan.framing + d.system_tokens + d.facts.used + d.summaries.used
        size = max(size, policy.cache_min_tokens + CACHE_MIN_SLACK - before)
    return min(room, size)


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


def _keep_window(d: Draft, policy: PackingPolicy, room: int, excluded: list[Excluded]) -> bool:
    """Take the whole cached window (its recalled messages and its history from
    ``window_start_seq``) if it fits in ``room``; otherwise keep only the guaranteed recent
    messages and return False."""
    history, inputs = d.history, d.inputs
    window = history.window_messages(inputs.window_start_seq)
    if window is None or window < history.messages:
        return False
    recalled = Retrieval(0, 0)
    if inputs.recalled:
        recalled = pick_retrieved(
            [RetrievedItem(m) for m in inputs.recalled],
            room,
            len(inputs.recalled),
            0,
            {inputs.new_message.id},
            d.meter,
            inputs.bot_name,
            [],
        )
        if len(recalled.entries) < len(inputs.recalled):
            return False
    history.extend(room - recalled.used, max_messages=window)
    if history.messages >= window and not recalled.entries.keys() & history.ids():
        d.recalled = recalled
        return True
    history.reset()
    history.extend(room, max_messages=policy.min_recent_messages)
    return False
