"""Budget arithmetic and policy validation messages."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatplatform.core.context import (
    PackingPolicy,
    PolicyError,
    check_policy,
    plan_budget,
    validate_policy,
)
from chatplatform.core.context.budget import (
    MIN_NEW_MESSAGE_TOKENS,
    counted_limit,
    fits,
    history_fetch_ceiling,
    policy_issues,
    section_cap,
    system_cap,
    usable_prompt_tokens,
)

SMALL = PackingPolicy(
    context_window=8_000,
    max_context_tokens=6_000,
    reserved_response_tokens=1_000,
    system_budget=1_000,
    facts_budget=500,
    summaries_budget=1_000,
    retrieval_budget=1_000,
    model_name="llama3.2:1b",
)


def test_usable_budget_is_cap_within_window_minus_reserve() -> None:
    assert usable_prompt_tokens(SMALL) == 5_000
    wide = PackingPolicy(context_window=4_000, max_context_tokens=9_000)
    assert usable_prompt_tokens(wide) == 4_000 - 4_096


def test_margin_applies_only_to_inexact_counters() -> None:
    policy = PackingPolicy(
        safety_margin_ratio=1.06,
        context_window=10_000,
        max_context_tokens=10_000,
        reserved_response_tokens=0,
    )
    exact = plan_budget(policy, exact=True)
    assert exact.margin_ratio == 1.0 and exact.limit == 10_000
    est = plan_budget(policy, exact=False, counter_overhead=5)
    assert est.margin_ratio == 1.06 and est.limit == 9_433
    assert est.overhead == 5 and est.framing == 3 + 2 * 5


@given(usable=st.integers(0, 2_000_000), ratio=st.floats(1.0, 2.0))
def test_counted_limit_is_the_largest_fitting_total(usable: int, ratio: float) -> None:
    limit = counted_limit(usable, ratio)
    assert limit == 0 or fits(limit, usable, ratio)
    assert not fits(limit + 1, usable, ratio)
    assert math.ceil(limit * ratio) <= usable


def test_caps_tokens_and_percent() -> None:
    plan = plan_budget(SMALL, exact=True)
    assert system_cap(SMALL, plan) == 1_000
    assert section_cap(SMALL, 700, 500) == 500
    pct = PackingPolicy(
        budget_unit="percent",
        system_budget=10,
        context_window=10_000,
        max_context_tokens=10_000,
        reserved_response_tokens=0,
    )
    pplan = plan_budget(pct, exact=True)
    assert system_cap(pct, pplan) == pplan.room // 10
    assert section_cap(pct, 25, 1_000) == 250
    greedy = PackingPolicy(
        budget_unit="percent",
        system_budget=100,
        facts_budget=0,
        summaries_budget=0,
        retrieval_budget=0,
    )
    gplan = plan_budget(greedy, exact=True)
    assert system_cap(greedy, gplan) == gplan.room - MIN_NEW_MESSAGE_TOKENS


def test_valid_policies_have_no_errors() -> None:
    assert validate_policy(PackingPolicy()) == []
    assert validate_policy(SMALL) == []
    check_policy(SMALL)


def test_sum_of_budgets_error_says_by_how_much() -> None:
    policy = PackingPolicy(
        context_window=8_000,
        max_context_tokens=8_000,
        reserved_response_tokens=2_000,
        system_budget=2_000,
        facts_budget=1_000,
        summaries_budget=2_000,
        retrieval_budget=2_000,
        model_name="llama3.2:1b",
    )
    plan = plan_budget(policy, exact=True)
    room = plan.room - MIN_NEW_MESSAGE_TOKENS
    [error] = validate_policy(policy, exact=True)
    assert error.startswith(
        "system + instructions + facts + summaries + retrieval budgets (7000 tokens)"
    )
    assert "model llama3.2:1b" in error
    assert f"({room} tokens" in error and f"lower them by {7_000 - room} tokens" in error
    [issue] = policy_issues(policy, exact=True)
    assert issue.field is None


def test_margin_shrinks_the_room_in_messages() -> None:
    policy = PackingPolicy(
        safety_margin_ratio=1.1,
        context_window=4_000,
        max_context_tokens=4_000,
        reserved_response_tokens=0,
        system_budget=1_000,
        facts_budget=1_000,
        summaries_budget=1_000,
        retrieval_budget=700,
    )
    assert validate_policy(policy, exact=True) == []
    [error] = validate_policy(policy, exact=False)
    assert "x1.1 safety margin" in error and "lower them by" in error


@pytest.mark.parametrize(
    ("change", "field", "needle"),
    [
        (
            {"max_context_tokens": 9_000},
            "max_context_tokens",
            "exceed the context window of model llama3.2:1b (8000 tokens): lower them by 1000",
        ),
        ({"context_window": 0}, "context_window", "must be a positive number"),
        (
            {"reserved_response_tokens": 5_900},
            "reserved_response_tokens",
            "lower the reserve to at most 5744",
        ),
        ({"reserved_response_tokens": -1}, "reserved_response_tokens", "must be >= 0"),
        ({"facts_budget": -5}, "facts_budget", "set it to 0 to leave the section out"),
        ({"retrieval_budget": 6_000}, "retrieval_budget", "exceeds the prompt budget"),
        ({"safety_margin_ratio": 0.9}, "safety_margin_ratio", "between 1.0 and 2.0"),
        ({"min_recent_messages": 200}, "min_recent_messages", "lower them to at most 100"),
        ({"recent_message_cap": 0}, "recent_message_cap", "must be >= 1"),
        ({"retrieval_neighbors": 50}, "retrieval_neighbors", "between 0 and 10"),
        ({"strategy": "magic"}, "strategy", "unknown"),
        (
            {
                "budget_unit": "percent",
                "system_budget": 10,
                "facts_budget": 150,
                "summaries_budget": 10,
                "retrieval_budget": 10,
            },
            "facts_budget",
            "must be 0-100",
        ),
        (
            {
                "budget_unit": "percent",
                "system_budget": 10,
                "facts_budget": 50,
                "summaries_budget": 40,
                "retrieval_budget": 30,
            },
            None,
            "lower them by 20 percentage points",
        ),
        (
            {"strategy": "rolling_summary", "raw_history_limit": 0},
            "raw_history_limit",
            "at least 1",
        ),
        ({"per_message_overhead": -3}, "per_message_overhead", "between 0 and 100"),
    ],
)
def test_each_mistake_names_the_field_and_the_fix(
    change: dict[str, object], field: str | None, needle: str
) -> None:
    policy = replace(SMALL, **change)  # type: ignore[arg-type]
    issues = policy_issues(policy)
    assert any(i.field == field and needle in i.message for i in issues), issues
    with pytest.raises(PolicyError):
        check_policy(policy)


def test_history_fetch_ceiling() -> None:
    ceiling = history_fetch_ceiling(SMALL, exact=True, new_message_tokens=100)
    assert ceiling == plan_budget(SMALL, exact=True).room - 100
    assert history_fetch_ceiling(SMALL, exact=True, new_message_tokens=10**9) == 0
