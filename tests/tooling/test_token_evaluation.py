"""evaluate(): exact fields and arithmetic, with stub counters."""

from __future__ import annotations

import pytest

from chatplatform.core.tokens.base import TokenCounter
from tooling.estimator_fitting.evaluation import evaluate


class WordCounter(TokenCounter):
    name = "words"
    exact = True

    def count(self, text: str) -> int:
        return len(text.split())


class ScaledCounter(TokenCounter):
    name = "scaled"

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def count(self, text: str) -> int:
        return round(len(text.split()) * self.factor)


ROWS = [
    {"lang": "en", "text": "one two three four"},
    {"lang": "en", "text": "one two"},
    {"lang": "fr", "text": "un deux trois quatre cinq six seven eight nine ten"},
    {"lang": "fr", "text": ""},
]


def test_fields_are_exactly_the_documented_ones():
    result = evaluate(ROWS, WordCounter(), WordCounter(), 1.0)
    assert list(result) == [
        "counter",
        "reference",
        "messages",
        "mape_percent",
        "per_lang",
        "under_margin_percent",
        "counter_mb_per_s",
        "reference_mb_per_s",
    ]
    assert result["messages"] == 4
    assert result["mape_percent"] == 0.0
    assert result["per_lang"]["en"] == {"messages": 2, "mape_percent": 0.0, "bias_percent": 0.0}
    assert result["under_margin_percent"] == 0.0
    assert result["counter_mb_per_s"] > 0 and result["reference_mb_per_s"] > 0


def test_errors_bias_and_margin():
    result = evaluate(ROWS, ScaledCounter(0.5), WordCounter(), 1.5)
    # estimates 2, 1, 5 for references 4, 2, 10: every text is 50 % low
    assert result["mape_percent"] == pytest.approx(50.0)
    assert result["per_lang"]["fr"]["bias_percent"] == pytest.approx(-50.0)
    # with margin 1.5 the estimate is still below the reference on the three non-empty texts
    assert result["under_margin_percent"] == pytest.approx(75.0)
    assert evaluate(ROWS, ScaledCounter(0.5), WordCounter(), 2.0)["under_margin_percent"] == 0.0
