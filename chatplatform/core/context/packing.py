"""``assemble(policy, inputs, counter)``: the prompt for one turn, inside the budget.

Order of claims (all in counted tokens, see :mod:`chatplatform.core.context.budget`):

1. framing (reply primer, system and new-message overheads);
2. the system prompt, capped by its budget (tail cut with a marker when longer);
3. the new message, which takes what it needs of the rest; one larger than that is cut
   head-and-tail with a visible marker, never dropped (a policy that sends oversized
   messages ``whole`` raises its limit for that turn instead, within the model's window);
4. the last ``min_recent_messages`` (whole tool-group units, newest first) if they fit;
5. the user's standing instructions and preferences, user facts, then what the policy's
   strategy adds (:mod:`.strategies`): summaries (not in
   ``sliding_window``), then retrieved messages (only in ``hybrid``), each within its cap
   and within what is left;
6. recent history gets everything left (:mod:`.window`: the previous turn's cached window
   while it fits, else a window restarted at the trim mark), walked newest to oldest and
   stopped at the first unit that does not fit (``rolling_summary``: only messages after
   the newest summary, at most ``raw_history_limit``); retrieved messages that history
   already shows are dropped and the freed tokens go to history; if not even the newest
   message fits, it is cut.

Placement is the cache-aware layout's (:mod:`.layout`): the cached prefix in ``system``, the
history and the new message as alternating user/assistant turns, the per-turn tail last.

The guarantee: the output is recounted (system + messages + overheads + primer); while
``ceil(total * margin) > usable`` (joins and merges can tokenize differently from the parts)
the oldest history is dropped, then retrieval, summaries and facts, the standing
instructions, then the larger of system
prompt and new message is cut further. ``trimmed_after_recount`` reports it; it is 0 in
practice because per-item accounting is conservative.

Work: counts are taken only for items that reach the walk and lack a stored count by this
counter, for short prefixes, and once on the final output; a text is tokenized once per
process while turns keep using it (:class:`~.meter.CountMemo`), so the final
recount of a turn tokenizes only what the previous turns did not already send. Per message,
the common case is a handful of C-level passes over columns (see
:class:`~chatplatform.core.context.history.History`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from chatplatform.core.memory.kinds import memory_kind_for

from .budget import check_policy, plan_budget, section_cap, system_cap
from .draft import Draft, fit
from .formatting import BLOCK_SEPARATOR, USER_MEMORIES_POINTER, client_system_block
from .history import History
from .meter import Meter
from .sections import SEPARATOR_TOKENS, pick_facts, pick_instructions
from .strategies import strategy_for
from .template import PER_TURN_POINTER, per_turn_names, render_template, turn_values_block
from .truncate import MIN_CUT_TOKENS
from .types import (
    AssembledPrompt,
    AssemblyInputs,
    Excluded,
    Included,
    PackingPolicy,
    SectionUsage,
    StablePrefix,
    Truncation,
)
from .window import history_candidates, keep_window

if TYPE_CHECKING:
    from chatplatform.core.tokens.base import TokenCounter


def _system_text(inputs: AssemblyInputs, has_facts: bool, meter: Meter) -> tuple[str, int, str]:
    """The system prompt, its tokens, and the block of this turn's values it points to."""
    if inputs.system is not None:
        s = inputs.system
        return s.text, meter.stored("system", "system", s.text, s.tokens, s.counted_by), ""
    if not inputs.system_template:
        client = client_system_block(inputs.client_system)
        return client, meter.text(client) if client else 0, ""
    values = dict(inputs.variables)
    values["user_memories"] = USER_MEMORIES_POINTER if has_facts else "(none stored)"
    values.setdefault("botname", inputs.bot_name)
    per_turn = per_turn_names(inputs.system_template, inputs.multi_user)
    block = turn_values_block(per_turn, values)
    text = render_template(
        inputs.system_template, {**values, **dict.fromkeys(per_turn, PER_TURN_POINTER)}
    )
    if client := client_system_block(inputs.client_system):
        text = f"{text}{BLOCK_SEPARATOR}{client}"
    return text, meter.text(text), block


def assemble(
    policy: PackingPolicy, inputs: AssemblyInputs, counter: TokenCounter
) -> AssembledPrompt:
    """Build the prompt for ``inputs.new_message`` under ``policy``, counted with ``counter``.

    A new message cut to fit under a policy that sends oversized messages ``whole`` is
    assembled again with the prompt limit raised by what was cut (in real tokens, within the
    model's window), so the message goes whole and every other section keeps what it had;
    ``widened_by`` reports the raise. Beyond the model's window it is cut all the same.

    Raises :class:`~chatplatform.core.context.budget.PolicyError` for an invalid policy and
    ``ValueError`` when the new message is an assistant turn.
    """
    prompt = _assemble(policy, inputs, counter)
    cut = next((t for t in prompt.truncated if t.kind == "new_message"), None)
    if cut is None or policy.oversized_message != "whole":
        return prompt
    ceiling = policy.context_window
    missing = math.ceil((cut.original_tokens - cut.kept_tokens + WIDEN_SLACK) * prompt.margin_ratio)
    raised = min(ceiling, policy.max_context_tokens + missing)
    if raised <= policy.max_context_tokens:
        return prompt
    wider = _assemble(replace(policy, max_context_tokens=raised), inputs, counter)
    return replace(wider, widened_by=raised - policy.max_context_tokens)


#: Counted tokens added to what a cut removed when the limit is raised to send the message
#: whole: the cut's marker and the joins around it tokenize a little differently.
WIDEN_SLACK = 16


def _assemble(
    policy: PackingPolicy, inputs: AssemblyInputs, counter: TokenCounter
) -> AssembledPrompt:
    check_policy(policy, exact=counter.exact, counter_overhead=counter.message_overhead)
    if inputs.new_message.role == "assistant":
        raise ValueError("the new message must be a user or tool turn")
    plan = plan_budget(policy, exact=counter.exact, counter_overhead=counter.message_overhead)
    meter = Meter(counter, plan.overhead)
    strategy = strategy_for(policy.strategy)
    excluded: list[Excluded] = []
    limit, after = strategy.history_span(policy, inputs)
    candidates, columns = history_candidates(inputs, limit, after, excluded)
    d = Draft(plan, meter, inputs, History(candidates, meter, inputs.multi_user, columns))

    has_facts = policy.max_facts > 0 and any(
        memory_kind_for(f.kind).section == "facts" for f in inputs.facts
    )
    d.system_full, system_full_tokens, d.turn_values = _system_text(inputs, has_facts, meter)
    d.cut_system(d.system_full, system_full_tokens, system_cap(policy, plan))
    if d.turn_values:
        d.turn_values_tokens = meter.text(d.turn_values) + SEPARATOR_TOKENS
    d.set_new()
    rest = plan.room - d.system_tokens - d.new_tokens - d.turn_values_tokens

    d.history.extend(rest, max_messages=policy.min_recent_messages)
    avail = rest - d.history.used

    cap = min(section_cap(policy, policy.instructions_budget, rest), avail)
    d.instructions = pick_instructions(
        inputs.facts,
        cap,
        policy.max_instructions,
        meter,
        excluded,
        inputs.instructions_ranked,
        room=avail,
    )
    avail -= d.instructions.used
    cap = min(section_cap(policy, policy.facts_budget, rest), avail)
    d.facts = pick_facts(
        inputs.facts, cap, policy.max_facts, meter, excluded, inputs.new_message.content
    )
    avail -= d.facts.used
    truncs: list[Truncation] = []
    cap = min(section_cap(policy, policy.summaries_budget, rest), avail)
    strategy.add_summaries(d, policy, cap, excluded, truncs)
    fixed = d.instructions.used + d.facts.used + d.summaries.used
    kept = keep_window(d, policy, rest - fixed)
    strategy.fill(
        d, policy, room=rest, facts_and_summaries=fixed, window_kept=kept, excluded=excluded
    )
    history_room = rest - fixed - d.recalled.used - d.retrieval.used
    if not d.history.count:
        cut = d.history.truncate_newest(history_room, MIN_CUT_TOKENS)
        if cut is not None:
            truncs.append(cut)
    trimmed = d.history.would_fit(history_room)
    excluded += [
        Excluded("message", m.id, m.tokens, "window_trim" if i < trimmed else "over_budget")
        for i, m in enumerate(d.history.untaken())
    ]

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
        SectionUsage(
            "instructions",
            d.instructions.budget,
            d.instructions.used,
            len(d.instructions.included),
        ),
        SectionUsage("facts", d.facts.budget, d.facts.used, len(d.facts.included)),
        SectionUsage("summaries", d.summaries.budget, d.summaries.used, len(d.summaries.included)),
        SectionUsage(
            "retrieval",
            # A kept window's recalled messages were admitted under the retrieval budget when
            # the window opened: they count as they are, not as the whole room they fit in.
            (d.recalled.used if kept else d.recalled.cap) + d.retrieval.cap,
            d.recalled.used + d.retrieval.used,
            len(d.recalled.entries) + len(d.retrieval.entries),
        ),
        SectionUsage("history", history_room, d.history.used, d.history.messages),
    )
    included = [Included("system", "system", d.system_tokens)] if d.system else []
    history_items = d.history.included()
    included += [
        *d.instructions.included,
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
        truncated=tuple(
            [
                *d.cuts.values(),
                *truncs,
                *d.recalled.excerpts.values(),
                *d.retrieval.excerpts.values(),
            ]
        ),
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
        block_ids=out.block_ids,
        tail=out.tail,
        tail_tokens=meter.text(out.tail) + SEPARATOR_TOKENS if out.tail else 0,
        window_start_seq=d.history.oldest_seq(),
        window_kept=kept and not trimmed,
        recalled_ids=tuple(sorted(d.recalled.entries, key=lambda i: d.recalled.entries[i][0].seq)),
        recalled_excerpt_ids=tuple(
            sorted(d.recalled.excerpts, key=lambda i: d.recalled.entries[i][0].seq)
        ),
    )
