"""Budget arithmetic and policy validation (pure; units are tokens unless stated).

* ``usable = min(max_context_tokens, context_window) - reserved_response_tokens`` is the
  prompt budget in real tokens (what the provider bills).
* ``margin_ratio`` is 1.0 for an exact counter, else ``policy.safety_margin_ratio`` (at least
  1) times ``policy.calibration_ratio`` (the online calibration, possibly below 1): a counted
  total ``T`` fits when ``ceil(T * margin_ratio) <= usable``; ``limit`` is the largest such ``T``
  (the budget in counted tokens).
* ``framing`` = reply primer + overhead of the system message + overhead of the new message:
  tokens spent whatever else goes in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import NamedTuple

from .types import BUDGET_UNITS, PackingPolicy

#: Room always kept for the new message (possibly truncated with a marker).
MIN_NEW_MESSAGE_TOKENS = 64
#: Smallest prompt budget a policy may leave.
MIN_PROMPT_TOKENS = 256
MAX_SAFETY_MARGIN = 2.0
#: Bounds of the online calibration ratio (the calibration ignores reports outside them).
MIN_CALIBRATION_RATIO = 0.125
MAX_CALIBRATION_RATIO = 8.0
MAX_RETRIEVAL_NEIGHBORS = 10
#: The longest head a recalled reply may be cut to (longer ones go whole anyway).
MAX_REPLY_EXCERPT_TOKENS = 4_000
SECTION_FIELDS = (
    "system_budget",
    "instructions_budget",
    "facts_budget",
    "summaries_budget",
    "retrieval_budget",
)


@dataclass(frozen=True, slots=True)
class BudgetPlan:
    """The prompt budget of one policy under one counter."""

    usable: int
    margin_ratio: float
    limit: int
    overhead: int
    framing: int

    @property
    def room(self) -> int:
        """Counted tokens for content once the fixed framing is paid."""
        return max(0, self.limit - self.framing)

    def fits(self, counted: int) -> bool:
        return fits(counted, self.usable, self.margin_ratio)


class PolicyIssue(NamedTuple):
    """A validation error: ``field`` is the policy field to change (``None`` = several)."""

    field: str | None
    message: str


class PolicyError(ValueError):
    """Raised by :func:`check_policy`; ``issues`` holds every problem found."""

    def __init__(self, issues: list[PolicyIssue]) -> None:
        self.issues = issues
        super().__init__("; ".join(i.message for i in issues))


def usable_prompt_tokens(policy: PackingPolicy) -> int:
    """Real tokens the prompt may take: the cap, bounded by the window, minus the reserve."""
    cap = min(policy.max_context_tokens, policy.context_window)
    return cap - policy.reserved_response_tokens


def margin_ratio(policy: PackingPolicy, exact: bool) -> float:
    if exact:
        return 1.0
    return max(1.0, float(policy.safety_margin_ratio)) * float(policy.calibration_ratio)


def fits(counted: int, usable: int, ratio: float) -> bool:
    """Whether a counted total, inflated by ``ratio``, stays within ``usable`` real tokens."""
    return math.ceil(counted * ratio) <= usable


def counted_limit(usable: int, ratio: float) -> int:
    """The largest counted total ``T`` with ``fits(T, usable, ratio)`` (0 if none)."""
    if usable <= 0:
        return 0
    t = int(usable / ratio)
    while t > 0 and not fits(t, usable, ratio):
        t -= 1
    while fits(t + 1, usable, ratio):
        t += 1
    return t


def message_overhead(policy: PackingPolicy, counter_overhead: int) -> int:
    if policy.per_message_overhead is None:
        return counter_overhead
    return policy.per_message_overhead


def plan_budget(policy: PackingPolicy, *, exact: bool, counter_overhead: int = 4) -> BudgetPlan:
    """The budget of ``policy`` for a counter (``exact``, its ``message_overhead``)."""
    return _plan_budget(policy, exact, counter_overhead)


# A turn asks for the plan of the same policy several times (the fetch ceiling, the section
# scaling, validation, packing), and consecutive turns of a tenant use the same policy: the
# plan is a pure value of its arguments (policies are frozen), so it is worked out once.
@lru_cache(maxsize=256)
def _plan_budget(policy: PackingPolicy, exact: bool, counter_overhead: int) -> BudgetPlan:
    usable = usable_prompt_tokens(policy)
    ratio = margin_ratio(policy, exact)
    overhead = message_overhead(policy, counter_overhead)
    framing = max(0, policy.reply_primer_tokens) + 2 * max(0, overhead)
    return BudgetPlan(usable, ratio, counted_limit(usable, ratio), overhead, framing)


def percent_of(value: int, base: int) -> int:
    return max(0, value * max(0, base) // 100)


def system_cap(policy: PackingPolicy, plan: BudgetPlan) -> int:
    """Tokens the system prompt may take; percent = share of ``plan.room``.

    Always leaves :data:`MIN_NEW_MESSAGE_TOKENS` for the new message.
    """
    room = plan.room
    if policy.budget_unit == "percent":
        cap = percent_of(policy.system_budget, room)
    else:
        cap = policy.system_budget
    return max(0, min(cap, room - MIN_NEW_MESSAGE_TOKENS))


def section_cap(policy: PackingPolicy, value: int, base: int) -> int:
    """Cap of a facts/summaries/retrieval section; ``base`` = tokens left after the system
    prompt, the new message and framing (the percent base)."""
    if policy.budget_unit == "percent":
        return percent_of(value, base)
    return max(0, min(value, base))


def sections_within_room(
    policy: PackingPolicy, *, exact: bool, counter_overhead: int = 4
) -> PackingPolicy:
    """``policy`` with its token section budgets scaled down together (keeping their
    proportions) when, under this counter's margin, they would not fit the room
    :func:`check_policy` requires; otherwise ``policy`` itself.

    Why: a policy is validated with its own safety margin, but at assembly an estimator's
    fitted margin and the online calibration can raise the margin, which shrinks the room in
    counted tokens; a valid policy must not turn into a :class:`PolicyError` because the model
    was found to count more tokens than estimated. Percent budgets scale by themselves.
    """
    if policy.budget_unit != "tokens":
        return policy
    sections = [max(0, getattr(policy, name)) for name in SECTION_FIELDS]
    total = sum(sections)
    plan = plan_budget(policy, exact=exact, counter_overhead=counter_overhead)
    room = plan.room - MIN_NEW_MESSAGE_TOKENS
    if total <= room or room <= 0:
        return policy
    scale = room / total
    system, instructions, facts, summaries, retrieval = (int(v * scale) for v in sections)
    return replace(
        policy,
        system_budget=system,
        instructions_budget=instructions,
        facts_budget=facts,
        summaries_budget=summaries,
        retrieval_budget=retrieval,
    )


def history_fetch_ceiling(
    policy: PackingPolicy, *, exact: bool, new_message_tokens: int, counter_overhead: int = 4
) -> int:
    """Upper bound of the tokens recent history can take this turn (stored counts plus
    ``overhead`` per message). A caller reading ``(seq desc, token_count)`` can stop fetching
    contents once the running total passes this (after ``min_recent_messages`` rows)."""
    plan = plan_budget(policy, exact=exact, counter_overhead=counter_overhead)
    return max(0, plan.room - max(0, new_message_tokens))


def _model(policy: PackingPolicy) -> str:
    return f"model {policy.model_name}" if policy.model_name else "the model"


def _label(field: str) -> str:
    return field.replace("_", " ")


class _Issues(list[PolicyIssue]):
    def add(self, field: str | None, message: str) -> None:
        self.append(PolicyIssue(field, message))


#: (field, lowest, highest or None, what the bound means): plain range checks.
_RANGES: tuple[tuple[str, float, float | None, str], ...] = (
    ("reserved_response_tokens", 0, None, ""),
    (
        "safety_margin_ratio",
        1.0,
        MAX_SAFETY_MARGIN,
        ": use 1.0 for exact counters and about 1.05-1.15 for estimates",
    ),
    (
        "calibration_ratio",
        MIN_CALIBRATION_RATIO,
        MAX_CALIBRATION_RATIO,
        ": the online calibration is out of its range",
    ),
    ("reply_primer_tokens", 0, 100, ""),
    ("min_recent_messages", 0, None, ": set 0 to turn it off"),
    ("raw_history_limit", 0, None, ": set 0 to turn it off"),
    ("max_summaries_in_context", 0, None, ": set 0 to leave summaries out"),
    ("max_facts", 0, None, ": set 0 to leave facts out"),
    ("max_instructions", 0, None, ": set 0 to leave standing instructions out"),
    ("retrieval_max_items", 0, None, ": set 0 to turn retrieval off"),
    ("retrieval_neighbors", 0, MAX_RETRIEVAL_NEIGHBORS, ""),
    ("reply_excerpt_tokens", 0, MAX_REPLY_EXCERPT_TOKENS, ": set 0 to send replies whole"),
    ("recent_message_cap", 1, None, ""),
)


def _basic_issues(p: PackingPolicy) -> _Issues:
    # The strategies pack with this module's arithmetic: their registry is imported when a
    # policy is checked, not with this module.
    from .strategies import UnknownStrategy, strategy_for

    out = _Issues()
    strategy = None
    try:
        strategy = strategy_for(p.strategy)
    except UnknownStrategy as unknown:
        out.add("strategy", str(unknown))
    if p.budget_unit not in BUDGET_UNITS:
        out.add("budget_unit", f"budget unit {p.budget_unit!r} is unknown: tokens or percent")
    if p.context_window <= 0:
        out.add(
            "context_window",
            f"the context window of {_model(p)} must be a positive "
            f"number of tokens (got {p.context_window})",
        )
    if p.max_context_tokens <= 0:
        out.add(
            "max_context_tokens",
            f"max context tokens must be positive (got "
            f"{p.max_context_tokens}): set at most {p.context_window}",
        )
    elif p.context_window > 0 and p.max_context_tokens > p.context_window:
        out.add(
            "max_context_tokens",
            f"max context tokens ({p.max_context_tokens}) exceed the "
            f"context window of {_model(p)} ({p.context_window} tokens): lower them by "
            f"{p.max_context_tokens - p.context_window} to at most {p.context_window}",
        )
    for name, lo, hi, hint in _RANGES:
        value = getattr(p, name)
        if value < lo or (hi is not None and value > hi):
            bound = f"between {lo} and {hi}" if hi is not None else f">= {lo}"
            out.add(name, f"{_label(name)} must be {bound} (got {value}){hint}")
    overhead = p.per_message_overhead
    if overhead is not None and not 0 <= overhead <= 100:
        out.add(
            "per_message_overhead",
            f"per message overhead must be between 0 and 100 "
            f"(got {overhead}), or empty to use the counter's",
        )
    if 1 <= p.recent_message_cap < p.min_recent_messages:
        out.add(
            "min_recent_messages",
            f"min recent messages ({p.min_recent_messages}) exceed "
            f"the recent message cap ({p.recent_message_cap}): lower them to at most "
            f"{p.recent_message_cap} or raise the cap",
        )
    for field, message in strategy.issues(p) if strategy is not None else ():
        out.add(field, message)
    return out


def _section_issues(p: PackingPolicy, exact: bool, counter_overhead: int) -> _Issues:
    out = _Issues()
    percent = p.budget_unit == "percent"
    for name in SECTION_FIELDS:
        value = getattr(p, name)
        if value < 0:
            out.add(
                name,
                f"{_label(name)} must be >= 0 (got {value}): set it to 0 to leave the section out",
            )
        elif percent and value > 100:
            out.add(name, f"{_label(name)} is {value}% but percent budgets must be 0-100")
    if out:
        return out
    plan = plan_budget(p, exact=exact, counter_overhead=counter_overhead)
    margin = "" if plan.margin_ratio == 1.0 else f" after the x{plan.margin_ratio} safety margin"
    room = plan.room - MIN_NEW_MESSAGE_TOKENS
    where = (
        f"the prompt budget of {_model(p)} ({room} tokens{margin}, once framing and "
        f"{MIN_NEW_MESSAGE_TOKENS} tokens for the new message are set aside)"
    )
    if percent:
        if percent_of(100 - p.system_budget, plan.room) < MIN_NEW_MESSAGE_TOKENS:
            out.add(
                "system_budget",
                f"system budget ({p.system_budget}%) leaves no room for "
                f"the new message in {where}: lower it",
            )
        total = p.instructions_budget + p.facts_budget + p.summaries_budget + p.retrieval_budget
        if total > 100:
            out.add(
                None,
                f"instructions + facts + summaries + retrieval budgets add up to {total}% of what "
                "is left after the system prompt and the new message: lower them by "
                f"{total - 100} percentage points",
            )
        return out
    for name in SECTION_FIELDS:
        value = getattr(p, name)
        if value > room:
            out.add(
                name, f"{_label(name)} ({value} tokens) exceeds {where}: lower it by {value - room}"
            )
    total = sum(getattr(p, name) for name in SECTION_FIELDS)
    if not out and total > room:
        out.add(
            None,
            f"system + instructions + facts + summaries + retrieval budgets ({total} tokens) "
            f"exceed {where}: lower them by {total - room} tokens in total",
        )
    return out


def policy_issues(
    policy: PackingPolicy, *, exact: bool = False, counter_overhead: int = 4
) -> list[PolicyIssue]:
    """Every problem of ``policy``, each saying what to change. ``exact=False`` (the default,
    for admin forms that do not know the counter yet) applies the safety margin."""
    issues = _basic_issues(policy)
    if issues:
        return list(issues)
    usable = usable_prompt_tokens(policy)
    if usable < MIN_PROMPT_TOKENS:
        cap = min(policy.max_context_tokens, policy.context_window)
        remedy = (
            f"lower the reserve to at most {cap - MIN_PROMPT_TOKENS} or raise max context tokens"
            if cap > MIN_PROMPT_TOKENS
            else "choose a model with a larger context window"
        )
        issues.add(
            "reserved_response_tokens",
            f"reserved response tokens "
            f"({policy.reserved_response_tokens}) leave {usable} prompt tokens of the "
            f"{cap}-token limit of {_model(policy)}; at least {MIN_PROMPT_TOKENS} are "
            f"needed: {remedy}",
        )
        return list(issues)
    return list(_section_issues(policy, exact, counter_overhead))


def validate_policy(
    policy: PackingPolicy, *, exact: bool = False, counter_overhead: int = 4
) -> list[str]:
    """Human-readable errors (empty list = valid)."""
    return [
        i.message for i in policy_issues(policy, exact=exact, counter_overhead=counter_overhead)
    ]


def check_policy(policy: PackingPolicy, *, exact: bool = False, counter_overhead: int = 4) -> None:
    """Raise :class:`PolicyError` if ``policy`` is invalid."""
    issues = _checked_issues(policy, exact, counter_overhead)
    if issues:
        raise PolicyError(list(issues))


# Every turn checks its policy; the issues are a pure value of the (frozen) policy and the
# counter's shape, so a tenant's policy is validated once per process, not once per turn.
@lru_cache(maxsize=256)
def _checked_issues(
    policy: PackingPolicy, exact: bool, counter_overhead: int
) -> tuple[PolicyIssue, ...]:
    return tuple(policy_issues(policy, exact=exact, counter_overhead=counter_overhead))
