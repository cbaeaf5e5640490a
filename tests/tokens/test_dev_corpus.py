"""The packaged estimator on the development corpus (the acceptance figures)."""

from __future__ import annotations

from tooling.estimator_fitting.evaluation import evaluate


def test_margin_holds_and_languages_are_within_ten_percent(dev_rows, estimator, reference):
    result = evaluate(dev_rows, estimator, reference, estimator.margin)
    assert result["under_margin_percent"] <= 0.5
    assert result["mape_percent"] <= 5.0
    worst = {
        lang: f["mape_percent"] for lang, f in result["per_lang"].items() if f["mape_percent"] > 10
    }
    assert not worst
