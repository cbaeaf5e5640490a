"""The strategy registry: one entry per strategy name, looked up in one place, each saying
what it needs from the data."""

from __future__ import annotations

from typing import get_args

import pytest

from chatplatform.core.context.budget import policy_issues
from chatplatform.core.context.strategies import (
    STRATEGIES,
    UnknownStrategy,
    strategy_choices,
    strategy_for,
    strategy_names,
)
from chatplatform.core.context.types import (
    DEFAULT_STRATEGY,
    STRATEGY_NAMES,
    PackingPolicy,
    StrategyName,
)


def test_every_strategy_name_has_one_entry() -> None:
    assert strategy_names() == STRATEGY_NAMES == get_args(StrategyName)
    assert len({s.name for s in STRATEGIES}) == len(STRATEGIES)
    assert DEFAULT_STRATEGY in STRATEGY_NAMES
    for name in STRATEGY_NAMES:
        assert strategy_for(name).name == name


def test_an_unknown_name_is_an_error() -> None:
    with pytest.raises(UnknownStrategy, match="'magic' is unknown: pick one of"):
        strategy_for("magic")
    (issue,) = policy_issues(PackingPolicy(strategy="magic"))  # type: ignore[arg-type]
    assert issue.field == "strategy" and "'magic' is unknown" in issue.message


def test_each_entry_offers_a_label_and_help() -> None:
    assert [name for name, _ in strategy_choices()] == list(STRATEGY_NAMES)
    for strategy in STRATEGIES:
        assert strategy.label.startswith(strategy.title)
        assert strategy.help.endswith(".")


def test_what_each_strategy_needs() -> None:
    sliding = strategy_for("sliding_window").needs
    assert not sliding.summaries and not sliding.retrieval and sliding.facts
    rolling = strategy_for("rolling_summary").needs
    assert rolling.rolling_summaries and rolling.periodic_summaries and not rolling.retrieval
    assert rolling.raw_history_limit and rolling.history_after == {"rolling"}
    hybrid = strategy_for("hybrid").needs
    assert hybrid.rolling_summaries and hybrid.retrieval and hybrid.retrieval_by_meaning
    assert not hybrid.history_after and not hybrid.provider_compaction
    compaction = strategy_for("server_compaction").needs
    # Its prompts only show the provider's compaction: no summaries of ours are made for it.
    assert compaction.provider_compaction and compaction.history_after == {"compaction"}
    assert not compaction.own_summaries
    assert not compaction.rolling_summaries and not compaction.periodic_summaries
    assert [s.name for s in STRATEGIES if s.needs.retrieval_by_meaning] == ["hybrid"]


def test_the_history_limit_follows_the_strategy() -> None:
    policy = PackingPolicy(recent_message_cap=50, raw_history_limit=8)
    assert strategy_for("rolling_summary").history_limit(policy) == 8
    assert {strategy_for(n).history_limit(policy) for n in STRATEGY_NAMES} == {8, 50}


def test_the_evaluations_list_the_strategies_they_can_measure() -> None:
    recall = strategy_names(lambda s: s.in_recall_eval)
    assert recall == ("sliding_window", "rolling_summary", "hybrid")
    assert strategy_names(lambda s: s.in_cost_replay) == STRATEGY_NAMES
