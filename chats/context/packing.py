"""``assemble(policy, inputs, counter)``: the prompt for one turn, inside the budget.

Order of claims (all in counted tokens, see :mod:`chats.context.budget`):

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
process while turns keep using it (:class:`~chats.context.history.CountMemo`), so the final
recount of a turn tokenizes only what the previous turns did not already send. Per message,
the common case is a handful of C-level passes over columns (see
:class:`~chats.context.history.History`).
"""

from __future__ import annotations

from functools import lru_cache
from itertools import islice
from operator import attrgetter, gt, itemgetter
from typing import TYPE_CHECKING, Any

from .budget import BudgetPlan, check_policy, plan_budget, section_cap, system_cap
from .formatting import BLOCK_SEPARATOR, USER_MEMORIES_POINTER, TurnText, format_turn
from .history import (
    CONTENT,
    ID,
    SEQ,
    TOOL_GROUP,
    History,
    Meter,
    drop_incomplete_groups,
    one_message_each,
    provider_messages,
    transpose,
    turns_alternate,
)
from .sections import Picked, Retrieval, pick_facts, pick_retrieved, pick_summaries
from .template import PER_TURN_VARIABLES, render_template, uses_variables
from .truncate import truncate_middle, truncate_tail
from .types import (
    AssembledPrompt,
    AssemblyInputs,
    Excluded,
    Included,
    MessageItem,
    PackingPolicy,
    SectionUsage,
    StablePrefix,
    Truncation,
)

if TYPE_CHECKING:
    from chatplatform.tokens.base import TokenCounter

_seq = attrgetter("seq")
_content_of = itemgetter("content")

#: Smallest room worth cutting a summary or history message into.
MIN_CUT_TOKENS = 48


class AssemblyError(RuntimeError):
    """The budget cannot hold even the framing (only possible with an invalid policy)."""


def _system_text(inputs: AssemblyInputs, has_facts: bool, meter: Meter) -> tuple[str, int]:
    if inputs.system is not None:
        s = inputs.system
        return s.text, meter.stored("system", "system", s.text, s.tokens, s.counted_by)
    if not inputs.system_template:
        return "", 0
    values = dict(inputs.variables)
    values["user_memories"] = USER_MEMORIES_POINTER if has_facts else "(none stored)"
    values.setdefault("botname", inputs.bot_name)
    text = render_template(inputs.system_template, values)
    return text, meter.text(text)


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


class _Draft:
    """Mutable state of one assembly, rendered and recounted until it fits."""

    def __init__(
        self, plan: BudgetPlan, meter: Meter, inputs: AssemblyInputs, history: History
    ) -> None:
        self.plan, self.meter, self.inputs, self.history = plan, meter, inputs, history
        self.system = ""
        self.system_tokens = 0
        self.system_full = ""
        self.new_turn = TurnText("user", "", "")
        self.new_tokens = 0
        self.facts = Picked("facts", 0)
        self.summaries = Picked("summaries", 0)
        self.retrieval = Retrieval(0, 0)
        self.cuts: dict[str, Truncation] = {}

    def render(self) -> tuple[str, list[dict[str, str]], str, list[str]]:
        """The system text, the provider messages, the stable prefix and the messages'
        contents (in order)."""
        stable = BLOCK_SEPARATOR.join(p for p in (self.system, *self.summaries.stable_blocks) if p)
        volatile = [
            *self.summaries.blocks,
            *self.facts.blocks,
            self.retrieval.render(self.inputs.bot_name),
        ]
        system = BLOCK_SEPARATOR.join(p for p in (stable, *volatile) if p)
        roles, texts = self.history.roles_and_texts()
        roles.append(self.new_turn.role)
        texts.append(self.new_turn.text)
        if turns_alternate(roles):
            # One message per turn (as a rule): the contents are the texts themselves.
            return system, one_message_each(roles, texts), stable, texts
        messages = provider_messages(roles, texts)
        return system, messages, stable, list(map(_content_of, messages))

    def count(self, system: str, contents: list[str]) -> int:
        """The recounted total of a rendered prompt (its system text and the contents of
        its messages)."""
        ov, meter = self.meter.overhead, self.meter
        total = self.plan.framing - 2 * ov + (meter.text(system) + ov if system else 0)
        return total + meter.texts(contents) + ov * len(contents)

    def cut_system(self, original: str, original_tokens: int, limit: int) -> None:
        cut = truncate_tail(original, limit, self.meter.counter, total_tokens=original_tokens)
        self.system, self.system_tokens = cut.text, cut.tokens
        if cut.truncated:
            self.cuts["system"] = Truncation("system", "system", original_tokens, cut.tokens)

    def set_new(self, limit: int | None = None) -> None:
        """Fit the new message into ``limit`` (default: all the room the system prompt
        leaves); a given ``limit`` (the final check) recounts instead of trusting its count."""
        new = self.inputs.new_message
        turn = format_turn(new, self.inputs.multi_user)
        prefix = self.meter.small(turn.prefix)
        if limit is None:
            content = self.meter.stored(
                "new_message", new.id, new.content, new.tokens, new.counted_by
            )
        else:
            content = self.meter.text(new.content)
        room = self.plan.room - self.system_tokens if limit is None else limit
        if prefix + content <= room:
            self.new_turn, self.new_tokens = turn, prefix + content
            return
        cut = truncate_middle(
            turn.content, max(0, room - prefix - 1), self.meter.counter, total_tokens=content
        )
        self.new_turn = TurnText(turn.role, turn.prefix, cut.text)
        self.new_tokens = prefix + cut.tokens + 1
        self.cuts["new_message"] = Truncation("new_message", new.id, content, cut.tokens)


def assemble(
    policy: PackingPolicy, inputs: AssemblyInputs, counter: TokenCounter
) -> AssembledPrompt:
    """Build the prompt for ``inputs.new_message`` under ``policy``, counted with ``counter``.

    Raises :class:`~chats.context.budget.PolicyError` for an invalid policy and
    ``ValueError`` when the new message is an assistant turn.
    """
    check_policy(policy, exact=counter.exact, counter_overhead=counter.message_overhead)
    if inputs.new_message.role == "assistant":
        raise ValueError("the new message must be a user or tool turn")
    plan = plan_budget(policy, exact=counter.exact, counter_overhead=counter.message_overhead)
    meter = Meter(counter, plan.overhead)
    excluded: list[Excluded] = []
    candidates, columns = _history_candidates(policy, inputs, excluded)
    d = _Draft(plan, meter, inputs, History(candidates, meter, inputs.multi_user, columns))

    has_facts = bool(inputs.facts) and policy.max_facts > 0
    d.system_full, system_full_tokens = _system_text(inputs, has_facts, meter)
    d.cut_system(d.system_full, system_full_tokens, system_cap(policy, plan))
    d.set_new()
    rest = plan.room - d.system_tokens - d.new_tokens

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
    if policy.strategy == "hybrid":
        cap = min(section_cap(policy, policy.retrieval_budget, rest), avail)
        skip = d.history.ids() | {inputs.new_message.id}
        d.retrieval = pick_retrieved(
            inputs.retrieved,
            cap,
            policy.retrieval_max_items,
            policy.retrieval_neighbors,
            skip,
            meter,
            inputs.bot_name,
            excluded,
        )
    else:
        excluded += [
            Excluded("retrieved", r.message.id, r.message.tokens, "strategy")
            for r in inputs.retrieved
        ]

    fixed = d.facts.used + d.summaries.used
    while True:
        d.history.extend(rest - fixed - d.retrieval.used)
        # Without retrieved entries there is nothing to deduplicate (and no id set to build).
        if not d.retrieval.entries or not d.retrieval.remove(d.history.ids(), excluded):
            break
    history_room = rest - fixed - d.retrieval.used
    if not d.history.count:
        cut = d.history.truncate_newest(history_room, MIN_CUT_TOKENS)
        if cut is not None:
            truncs.append(cut)
    excluded += [Excluded("message", m.id, m.tokens, "over_budget") for m in d.history.untaken()]

    system, messages, stable, total, trimmed = _fit(d, excluded)
    sections = (
        SectionUsage("framing", plan.framing, plan.framing, 0),
        SectionUsage("system", system_cap(policy, plan), d.system_tokens, int(bool(d.system))),
        SectionUsage("new_message", plan.room - d.system_tokens, d.new_tokens, 1),
        SectionUsage("facts", d.facts.budget, d.facts.used, len(d.facts.included)),
        SectionUsage("summaries", d.summaries.budget, d.summaries.used, len(d.summaries.included)),
        SectionUsage("retrieval", d.retrieval.cap, d.retrieval.used, len(d.retrieval.entries)),
        SectionUsage("history", history_room, d.history.used, d.history.messages),
    )
    included = [Included("system", "system", d.system_tokens)] if d.system else []
    included += [
        *d.facts.included,
        *d.summaries.included,
        *d.retrieval.included(),
        *d.history.included(),
        Included("new_message", inputs.new_message.id, d.new_tokens),
    ]
    return AssembledPrompt(
        system=system,
        messages=messages,
        sections=sections,
        included=tuple(included),
        excluded=tuple(excluded),
        truncated=tuple([*d.cuts.values(), *truncs]),
        recounted=tuple(meter.recounted),
        stable_prefix=_stable_prefix(inputs, stable, meter),
        prompt_tokens=total,
        budget=plan.usable,
        counted_limit=plan.limit,
        margin_ratio=plan.margin_ratio,
        counter_name=counter.name,
        strategy=policy.strategy,
        trimmed_after_recount=trimmed,
    )


def _stable_prefix(inputs: AssemblyInputs, stable: str, meter: Meter) -> StablePrefix:
    """Empty when the template uses a per-turn variable ({timestamp}, {time}): marking a
    prefix that changes every turn cacheable would only pay cache writes."""
    template = inputs.system_template if inputs.system is None else None
    if not stable or (template and _uses_per_turn_variables(template)):
        return StablePrefix(0, 0)
    return StablePrefix(len(stable), meter.text(stable))


@lru_cache(maxsize=256)
def _uses_per_turn_variables(template: str) -> bool:
    """Whether ``template`` uses a per-turn variable (a tenant's template is scanned once per
    process, not on every turn)."""
    return bool(uses_variables(template) & PER_TURN_VARIABLES)


def _fit(d: _Draft, excluded: list[Excluded]) -> tuple[str, list[dict[str, str]], str, int, int]:
    """Render, recount, and shed content until the recounted total fits (module docstring).

    Each round removes history units, a whole optional section, or shrinks the larger of the
    system prompt and the new message (by fresh counts) by more than the overflow, so the
    loop ends; only a budget smaller than the framing itself raises :class:`AssemblyError`.
    """
    trimmed = 0
    while True:
        system, messages, stable, contents = d.render()
        total = d.count(system, contents)
        if d.plan.fits(total):
            return system, messages, stable, total, trimmed
        over = total - d.plan.limit
        if d.history.count:
            for unit in d.history.drop_oldest(over):
                trimmed += len(unit.items)
                excluded += [
                    Excluded("message", m.id, n, "recount")
                    for m, n in zip(unit.items, unit.per_item, strict=True)
                ]
        elif d.retrieval.entries:
            excluded += [
                Excluded(i.kind, i.id, i.tokens, "recount") for i in d.retrieval.included()
            ]
            d.retrieval.entries.clear()
        elif d.summaries.included or d.facts.included:
            for picked in (d.summaries, d.facts):
                excluded += [Excluded(i.kind, i.id, i.tokens, "recount") for i in picked.included]
                picked.blocks, picked.stable_blocks, picked.included = [], [], []
                picked.used = 0
        else:
            system_now = d.meter.text(d.system)
            new_now = d.meter.text(d.new_turn.text)
            if system_now == 0 and new_now == 0:
                raise AssemblyError("the prompt budget cannot hold the framing; check the policy")
            if system_now > new_now:
                full = d.meter.text(d.system_full)
                d.cut_system(d.system_full, full, max(0, system_now - over - 2))
            else:
                d.set_new(max(0, new_now - over - 2))
