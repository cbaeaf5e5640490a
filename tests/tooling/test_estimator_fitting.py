"""Fitting: the NNLS solver, weights, folds, and a small end-to-end fit and reload."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from chatplatform.core.tokens.estimator import EstimatorCounter
from tooling.estimator_fitting import corpus, fitting
from tooling.estimator_fitting.nnls import nnls


def brute_force_nnls(matrix, target):
    """Best least-squares solution over every support set with non-negative values."""
    best, best_residual = np.zeros(matrix.shape[1]), float("inf")
    for size in range(matrix.shape[1] + 1):
        for support in itertools.combinations(range(matrix.shape[1]), size):
            solution = np.zeros(matrix.shape[1])
            if support:
                solution[list(support)] = np.linalg.lstsq(matrix[:, support], target, rcond=None)[0]
            if (solution >= -1e-12).all():
                residual = float(np.linalg.norm(matrix @ solution - target))
                if residual < best_residual - 1e-12:
                    best, best_residual = solution, residual
    return best


@pytest.mark.parametrize("seed", range(20))
def test_nnls_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    matrix, target = rng.normal(size=(12, 4)), rng.normal(size=12)
    assert np.allclose(nnls(matrix, target), brute_force_nnls(matrix, target), atol=1e-7)


def test_fit_recovers_non_negative_coefficients_in_relative_error():
    rng = np.random.default_rng(0)
    features = rng.integers(0, 50, size=(200, 3)).astype(float) + 1
    truth = np.array([0.5, 0.0, 2.0])
    coefficients = fitting.fit_coefficients(features, features @ truth, np.ones(200))
    assert np.allclose(coefficients, truth, atol=1e-3)


def test_every_language_weighs_the_same():
    samples = [corpus.Sample("en", "x", "g", "corpus")] * 9 + [
        corpus.Sample("uz", "y", "h", "corpus")
    ]
    weights = corpus.sample_weights(samples)
    assert weights[:9].sum() == pytest.approx(weights[9:].sum())


def test_snippets_stay_in_their_source_group():
    rows = [{"lang": "en", "text": "a b c d e f", "source": "file-1"}]
    samples = corpus.make_samples(rows, supplement=False)
    assert {s.group for s in samples if s.kind != "synthetic"} == {"corpus:file-1"}
    assert {s.kind for s in samples} == {"corpus", "snippet", "synthetic"}


def test_synthetic_texts_are_deterministic_and_varied():
    rows = [{"lang": "en", "text": "alpha beta gamma delta"}]
    texts = corpus.synthetic_texts(rows, count=50, seed=1)
    assert texts == corpus.synthetic_texts(rows, count=50, seed=1)
    joined = "".join(texts)
    assert any(ch.isdigit() for ch in joined) and "https://" in joined
    assert any(ord(ch) >= 0x1F300 for ch in joined)


def test_django_supplement_covers_many_scripts():
    rows = corpus.django_supplement()
    langs = {row["lang"] for row in rows}
    assert {"th", "hi", "el", "hy", "ka", "ko", "ru", "ar", "he"} <= langs
    assert all(row["text"] and "%(" not in row["text"] for row in rows)


def test_small_fit_writes_a_loadable_estimator(tmp_path, dev_rows, reference):
    rows = [row for row in dev_rows if row["lang"] in {"en", "ru", "zh"}][:60]
    result = fitting.fit_estimator(rows, reference, version="test", supplement=False, folds=3)
    assert result.margin >= 1.0
    assert all(value >= 0 for value in result.coefficients.values())
    path = fitting.write_estimator(
        result, tmp_path / "estimator_coefficients.json", version="test", reference="o200k_base"
    )
    estimator = EstimatorCounter.from_file(path)
    assert estimator.name == "estimator-test"
    assert estimator.count("hello world") > 0
    assert (tmp_path / "estimator_lexicon.txt.gz").is_file()
