"""The packaged estimator: counter contract, additivity bounds, margin, loading."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatplatform.core.tokens import CounterNotAvailable, get_counter
from chatplatform.core.tokens.estimator import EstimatorCounter, load_default_estimator

# Text built from pieces of many scripts, code and whitespace, as chat messages mix them.
PIECES = [
    "the",
    "quick",
    "brown",
    "internationalization",
    "Привет",
    "мир",
    "Καλημέρα",
    "Բարեւ",
    "გამარჯობა",
    "שלום",
    "مرحبا",
    "नमस्ते",
    "வணக்கம்",
    "สวัสดี",
    "안녕하세요",
    "中文文本",
    "ひらがな",
    "カタカナ",
    "Việt",
    "Ñandú",
    "łódź",
    "breadthFirstSearch",
    "snake_case",
    "x",
    "HTTPServer",
    "2024-01-15",
    "3.14159",
    "😀",
    "—",
    "«»",
    "()",
    "=>",
    "{",
    "}",
    ";",
    "//",
    "https://example.com/a/b?c=1",
    " ",
    "  ",
    "\n",
    "\n\n",
    "\t",
    "    ",
]
texts = st.lists(st.sampled_from(PIECES), max_size=40).map("".join) | st.text(max_size=200)
whitespace = st.sampled_from([" ", "\n", "\n\n", "\t"])


def test_empty_text_counts_zero(estimator):
    assert estimator.count("") == 0


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts)
def test_counts_are_non_negative_integers(estimator, text):
    count = estimator.count(text)
    assert isinstance(count, int) and count >= 0
    assert (count > 0) == bool(text) or not text.strip()


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts, whitespace, texts)
def test_joining_at_whitespace_is_additive_within_the_seam_tolerance(estimator, a, blank, b):
    joined = estimator.count(a + blank + b)
    parts = estimator.count(a + blank) + estimator.count(b)
    # The direction that matters for budgets: a joined prompt never costs more than its
    # stored parts plus the seam tolerance (parts may over-count more: that is only safe).
    assert joined - parts <= estimator.seam_tolerance
    assert parts - joined <= estimator.word_seam_tolerance


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts, texts)
def test_joining_anywhere_is_additive_within_the_word_seam_tolerance(estimator, a, b):
    assert abs(estimator.count(a + b) - estimator.count(a) - estimator.count(b)) <= (
        estimator.word_seam_tolerance
    )


def test_tolerances_are_small(estimator):
    assert estimator.seam_tolerance <= 6
    assert estimator.word_seam_tolerance <= 60


def test_count_message_adds_the_overhead(estimator):
    text = "Bonjour, où est la gare ?"
    assert (
        estimator.count_message("user", text) == estimator.count(text) + estimator.message_overhead
    )


def test_margin_and_with_margin(estimator):
    assert 1.0 < estimator.margin < 1.5
    assert estimator.with_margin(0) == 0
    assert estimator.with_margin(100) == math.ceil(100 * estimator.margin - 1e-9)
    assert estimator.with_margin(1) >= 1


def test_name_identifies_the_coefficient_version(estimator):
    assert estimator.name == f"estimator-{estimator.version}"
    assert not estimator.exact
    assert estimator.reference == "o200k_base"


def test_registry_returns_the_shared_default():
    assert get_counter("estimator") is load_default_estimator()
    assert get_counter(load_default_estimator().name) is load_default_estimator()


def test_packaged_data_records_the_fit():
    data = load_default_estimator().metadata
    assert data["margin_quantile"] == 0.995
    assert data["fit"]["cross_validation"]["folds"] >= 2
    assert set(data["coefficients"]) <= set(load_default_estimator().coefficients)


def test_invalid_coefficients_are_refused():
    with pytest.raises(ValueError):
        EstimatorCounter(
            {"no_such_feature": 1.0}, frozenset(), version="t", reference="r", margin=1.1
        )
    with pytest.raises(ValueError):
        EstimatorCounter({"oov_words": -1.0}, frozenset(), version="t", reference="r", margin=1.1)
    with pytest.raises(ValueError):
        EstimatorCounter({}, frozenset(), version="t", reference="r", margin=0.9)


def test_a_corrupt_lexicon_is_refused(tmp_path, estimator):
    source = estimator.metadata
    (tmp_path / source["lexicon"]["file"]).write_bytes(b"not gzip")
    path = tmp_path / "estimator_coefficients.json"
    path.write_text(json.dumps(source), encoding="utf-8")
    with pytest.raises(CounterNotAvailable):
        EstimatorCounter.from_file(path)
