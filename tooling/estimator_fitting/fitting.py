"""Fitting the estimator's coefficients against a reference counter (needs numpy).

The estimator is judged on corpora it never saw, so the fit aims at languages, not at the
training file:

- the training set weighs every language the same and supplements the corpus with texts
  of the scripts and shapes it may lack (:mod:`tooling.estimator_fitting.corpus`);
- the loss is relative error (weighted least squares with weight 1/reference, then a few
  iteratively re-weighted rounds toward mean absolute percentage error), the coefficients
  are non-negative and a small ridge keeps rarely seen features near zero;
- k-fold cross-validation grouped by source gives the held-out error figures and the
  safety margin: the 99.5 % quantile of reference/estimate on held-out folds, over the
  corpus texts and the message-sized supplement texts in the corpus's languages.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from chatplatform.core.tokens.base import TokenCounter
from chatplatform.core.tokens.estimator import FORMAT_VERSION, EstimatorCounter
from chatplatform.core.tokens.features import FEATURE_NAMES, extract_features

from .corpus import Sample, build_lexicon, make_samples, sample_weights
from .nnls import nnls

MARGIN_QUANTILE = 0.995
MARGIN_MIN_CHARS = 200  # supplement texts shorter than a chat message stay out of the margin
RIDGE = 1e-4
IRLS_ROUNDS = 3


@dataclass
class FitResult:
    """Coefficients and the figures that justify them (see :func:`fit_estimator`)."""

    coefficients: dict[str, float]
    lexicon: frozenset[bytes]
    margin: float
    report: dict[str, Any] = field(default_factory=dict)


def design_matrix(texts: Iterable[str], lexicon: frozenset[bytes]) -> np.ndarray:
    return np.array([extract_features(text, lexicon) for text in texts], dtype=float)


def fit_coefficients(
    features: np.ndarray, reference: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """Non-negative coefficients minimising weighted relative error (toward MAPE).

    Rows with a zero reference are ignored. Columns are scaled to unit weighted norm before
    the ridge so that the penalty does not depend on feature units.
    """
    keep = reference > 0
    features, reference, weights = features[keep], reference[keep], weights[keep]
    relative = features / reference[:, None]
    current = weights / weights.sum()
    coefficients = np.zeros(features.shape[1])
    for round_ in range(IRLS_ROUNDS + 1):
        root = np.sqrt(current)[:, None]
        design = relative * root
        scale = np.sqrt((design**2).sum(axis=0))
        scale[scale == 0] = 1.0
        augmented = np.vstack([design / scale, math.sqrt(RIDGE) * np.eye(features.shape[1])])
        target = np.concatenate([root[:, 0], np.zeros(features.shape[1])])
        coefficients = nnls(augmented, target) / scale
        if round_ < IRLS_ROUNDS:  # re-weight toward absolute (not squared) relative error
            error = np.abs(relative @ coefficients - 1.0)
            current = weights / np.maximum(error, 0.01)
            current /= current.sum()
    return coefficients


def _folds(samples: Sequence[Sample], k: int) -> np.ndarray:
    return np.array([zlib.crc32(sample.group.encode()) % k for sample in samples])


def fit_estimator(
    corpus: Sequence[dict[str, Any]],
    reference: TokenCounter,
    *,
    version: str = "v1",
    supplement: bool = True,
    folds: int = 5,
    seed: int = 0,
) -> FitResult:
    """Fit on ``corpus`` (+ supplement), cross-validate, choose the margin."""
    samples = make_samples(corpus, supplement=supplement, seed=seed)
    lexicon = build_lexicon(reference.name)
    features = design_matrix((s.text for s in samples), lexicon)
    counts = np.array([reference.count(s.text) for s in samples], dtype=float)
    weights = sample_weights(samples)
    fold_of = _folds(samples, folds)
    held_out = np.zeros(len(samples))
    for fold in range(folds):
        train = fold_of != fold
        coefficients = fit_coefficients(features[train], counts[train], weights[train])
        held_out[~train] = np.ceil(features[~train] @ coefficients - 1e-9)
    coefficients = fit_coefficients(features, counts, weights)
    fitted = np.ceil(features @ coefficients - 1e-9)
    ratios = {
        "corpus": _held_out_ratios(samples, counts, held_out, lambda s: s.kind == "corpus"),
        "supplement": _held_out_ratios(samples, counts, held_out, lambda s: s.kind == "supplement"),
        "margin_pool": _held_out_ratios(samples, counts, held_out, _in_margin_pool(samples)),
    }
    ratios = {kind: values for kind, values in ratios.items() if len(values)}
    margin = max(
        1.0, math.ceil(float(np.quantile(ratios["margin_pool"], MARGIN_QUANTILE)) * 100) / 100
    )
    report = {
        "samples": {
            kind: sum(s.kind == kind for s in samples)
            for kind in ("corpus", "snippet", "supplement", "synthetic")
        },
        "cross_validation": {
            "folds": folds,
            "grouped_by": "source file (corpus and its snippets) / language chunk (supplement)",
            **_error_report(samples, counts, held_out),
        },
        "training_fit": _error_report(samples, counts, fitted),
        "held_out_ratio_quantiles": {
            kind: {
                str(q): round(float(np.quantile(values, q)), 4)
                for q in (0.5, 0.9, 0.95, 0.99, 0.995)
            }
            | {"max": round(float(values.max()), 4)}
            for kind, values in ratios.items()
        },
    }
    names = list(FEATURE_NAMES)
    return FitResult(
        {name: round(float(value), 6) for name, value in zip(names, coefficients, strict=True)},
        lexicon,
        margin,
        report,
    )


def _held_out_ratios(
    samples: Sequence[Sample],
    counts: np.ndarray,
    held_out: np.ndarray,
    keep: Callable[[Sample], bool],
) -> np.ndarray:
    """reference / held-out estimate of the kept samples with a positive reference."""
    rows = np.array([keep(s) and c > 0 for s, c in zip(samples, counts, strict=True)])
    return counts[rows] / np.maximum(held_out[rows], 1.0)


def _in_margin_pool(samples: Sequence[Sample]) -> Callable[[Sample], bool]:
    """Texts the margin must cover: every corpus text, and the message-sized supplement texts
    in the corpus's languages (the same languages in another domain, which widens the tail)."""
    languages = {s.lang.split("_")[0] for s in samples if s.kind == "corpus"}

    def keep(sample: Sample) -> bool:
        if sample.kind == "corpus":
            return True
        return (
            sample.kind == "supplement"
            and len(sample.text) >= MARGIN_MIN_CHARS
            and sample.lang.split("_")[0] in languages
        )

    return keep


def _error_report(
    samples: Sequence[Sample], counts: np.ndarray, estimates: np.ndarray
) -> dict[str, Any]:
    """MAPE (%) overall and per language of corpus texts, and of the supplement overall."""
    by_lang: dict[str, list[int]] = defaultdict(list)
    by_kind: dict[str, list[int]] = defaultdict(list)
    for index, sample in enumerate(samples):
        if counts[index] <= 0:
            continue
        by_kind[sample.kind].append(index)
        if sample.kind == "corpus":
            by_lang[sample.lang].append(index)

    def mape(indexes: list[int]) -> float:
        rows = np.array(indexes)
        return round(float(np.mean(np.abs(estimates[rows] / counts[rows] - 1.0))) * 100, 2)

    corpus_rows = [i for rows in by_lang.values() for i in rows]
    per_lang = {
        lang: {
            "mape_percent": mape(rows),
            "bias_percent": round((estimates[rows].sum() / counts[rows].sum() - 1) * 100, 2),
        }
        for lang, rows in sorted(by_lang.items())
    }
    return {
        "corpus_mape_percent": mape(corpus_rows) if corpus_rows else None,
        "corpus_worst_language_mape_percent": max(
            (v["mape_percent"] for v in per_lang.values()), default=None
        ),
        "supplement_mape_percent": mape(by_kind["supplement"]) if by_kind["supplement"] else None,
        "synthetic_mape_percent": mape(by_kind["synthetic"]) if by_kind["synthetic"] else None,
        "per_lang": per_lang,
    }


def write_estimator(result: FitResult, output: Path | str, *, version: str, reference: str) -> Path:
    """Write the coefficients JSON and, beside it, the gzipped lexicon; return the JSON path."""
    output = Path(output)
    lexicon_path = output.with_name(output.stem.replace("coefficients", "lexicon") + ".txt.gz")
    if lexicon_path == output:
        lexicon_path = output.with_suffix(".lexicon.txt.gz")
    words = sorted(result.lexicon)
    packed = gzip.compress(b"\n".join(words), compresslevel=9, mtime=0)
    lexicon_path.write_bytes(packed)
    data = {
        "format": FORMAT_VERSION,
        "name": f"estimator-{version}",
        "version": version,
        "reference": reference,
        "margin": result.margin,
        "margin_quantile": MARGIN_QUANTILE,
        "message_overhead": 4,
        "lexicon": {
            "file": lexicon_path.name,
            "sha256": hashlib.sha256(packed).hexdigest(),
            "words": len(words),
            "max_word_chars": max((len(word.decode("utf-8")) for word in words), default=0),
        },
        "coefficients": result.coefficients,
        "fit": result.report,
    }
    output.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    EstimatorCounter.from_file(output)  # refuse to leave behind a file that does not load
    return output
