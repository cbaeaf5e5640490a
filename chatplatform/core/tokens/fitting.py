"""Fitting the estimator's coefficients against a reference counter (needs numpy).

The estimator is judged on corpora it never saw, so the fit aims at languages, not at the
training file:

- every language weighs the same, whatever its number of texts (English must not dominate);
- the corpus is supplemented with translated UI strings from Django's locale files (always
  installed, BSD-licensed), which cover scripts the corpus may lack (Greek, Thai, Indic,
  Armenian, ...), with short snippets cut from the corpus texts (chat-sized messages) and
  with synthetic texts of numbers, codes, emoji, URLs and long runs built from its words;
- the loss is relative error (weighted least squares with weight 1/reference, then a few
  iteratively re-weighted rounds toward mean absolute percentage error), the coefficients
  are non-negative and a small ridge keeps rarely seen features near zero;
- k-fold cross-validation grouped by source gives the held-out error figures and the
  safety margin: the 99.5 % quantile of reference/estimate on held-out folds, over the
  corpus texts and the message-sized supplement texts in the corpus's languages.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import json
import math
import random
import re
import unicodedata
import uuid
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .base import TokenCounter
from .estimator import FORMAT_VERSION, EstimatorCounter
from .features import FEATURE_NAMES, extract_features
from .nnls import nnls

MARGIN_QUANTILE = 0.995
MARGIN_MIN_CHARS = 200  # supplement texts shorter than a chat message stay out of the margin
SUPPLEMENT_WEIGHT = 0.25  # per supplement language, against 1.0 per corpus language
SNIPPET_WEIGHT = 0.3  # per corpus language, for its short snippets
SYNTHETIC_WEIGHT = 0.5  # for all synthetic texts together (numbers, codes, emoji, URLs, ...)
RIDGE = 1e-4
IRLS_ROUNDS = 3


@dataclass(frozen=True)
class Sample:
    """One training text: ``kind`` is corpus, supplement or snippet; ``group`` its fold unit."""

    lang: str
    text: str
    group: str
    kind: str


@dataclass
class FitResult:
    """Coefficients and the figures that justify them (see :func:`fit_estimator`)."""

    coefficients: dict[str, float]
    lexicon: frozenset[bytes]
    margin: float
    report: dict[str, Any] = field(default_factory=dict)


def read_corpus(path: Path | str) -> list[dict[str, Any]]:
    """Rows of a JSONL corpus: objects with at least ``lang`` and ``text``."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            if not isinstance(row.get("text"), str) or not isinstance(row.get("lang"), str):
                raise ValueError(f"{path}:{number}: a row needs string 'lang' and 'text'")
            rows.append(row)
    return rows


def build_lexicon(encoding_name: str) -> frozenset[bytes]:
    """Words the public BPE ``encoding_name`` encodes as one token after a space."""
    from .bpe import _load_encoding

    words = set()
    for token in _load_encoding(encoding_name).token_byte_values():
        if len(token) < 2 or token[:1] != b" ":
            continue
        try:
            word = token[1:].decode("utf-8")
        except UnicodeDecodeError:
            continue
        if all(unicodedata.category(char)[0] in "LM" for char in word):
            words.add(token[1:])
    return frozenset(words)


_PO_STRING = re.compile(r'^msgstr(?:\[\d+\])? ((?:".*"\s*)+)', re.MULTILINE)
_PO_NOISE = re.compile(r"%\([^)]*\)[-+ #0-9.]*[a-z]|%[a-z]|\{[^}]*\}|<[^>]+>|&[a-z]+;")


def django_supplement(seed: int = 0) -> list[dict[str, Any]]:
    """Chat-sized texts in ~100 languages joined from Django's translated UI strings (read
    as files from the installed package, which is not imported)."""
    spec = importlib.util.find_spec("django")
    if spec is None or spec.origin is None:
        return []
    root = Path(spec.origin).resolve().parent
    strings: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.glob("**/locale/*/LC_MESSAGES/django.po")):
        lang = path.parent.parent.name
        if lang.startswith("en"):
            continue
        # the first msgstr of a file is its header (Project-Id-Version, Plural-Forms, ...)
        for match in list(_PO_STRING.finditer(path.read_text(encoding="utf-8")))[1:]:
            parts = re.findall(r'"((?:[^"\\]|\\.)*)"', match.group(1))
            text = _PO_NOISE.sub("", _unescape_po("".join(parts))).strip()
            if len(text) > 1:
                strings[lang].append(text)
    rows = []
    rng = random.Random(seed)
    for lang, texts in sorted(strings.items()):
        chunk: list[str] = []
        target = rng.choice((60, 200, 600, 1500))
        for text in texts:
            chunk.append(text)
            if sum(map(len, chunk)) >= target:
                joiner = rng.choice((" ", "\n", ". "))
                rows.append({"lang": lang, "text": joiner.join(chunk), "source": f"django:{lang}"})
                chunk, target = [], rng.choice((60, 200, 600, 1500))
    return rows


def _unescape_po(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), text)


def short_snippets(
    rows: Sequence[dict[str, Any]], per_text: int, seed: int
) -> list[dict[str, Any]]:
    """Windows of 1-40 words cut from ``rows`` at whitespace, like short chat messages."""
    rng = random.Random(seed)
    snippets = []
    for row in rows:
        words = row["text"].split(" ")
        for _ in range(per_text):
            size = rng.randint(1, min(40, len(words)))
            start = rng.randint(0, len(words) - size)
            text = " ".join(words[start : start + size]).strip()
            if text:
                snippets.append({**row, "text": text})
    return snippets


def synthetic_texts(corpus: Sequence[dict[str, Any]], count: int, seed: int) -> list[str]:
    """Texts rare in prose but common in chats: numbers, codes, emoji, URLs, long runs.

    Words come from the corpus, so the texts stay in its languages.
    """
    rng = random.Random(seed)
    words = [word for row in corpus for word in row["text"].split() if word.isalpha()] or ["word"]
    emoji = [chr(code) for start, end in _EMOJI_RANGES for code in range(start, end)]

    def number() -> str:
        return rng.choice(
            (
                str(rng.randint(0, 10 ** rng.randint(1, 12))),
                f"{rng.uniform(0, 1000):.{rng.randint(1, 4)}f}",
                f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}",
                f"+{rng.randint(1, 99)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}",
            )
        )

    def blob() -> str:
        data = rng.randbytes(rng.randint(4, 200))
        return rng.choice(
            (
                data.hex(),
                base64.b64encode(data).decode(),
                str(uuid.UUID(bytes=data[:16].ljust(16, b"x"))),
            )
        )

    def glyphs() -> str:
        picked = "".join(
            rng.choice(emoji) + rng.choice(("", "", "\ufe0f", "\U0001f3fd"))
            for _ in range(rng.randint(1, 6))
        )
        return picked if rng.random() < 0.5 else f"{rng.choice(words)} {picked}"

    def url() -> str:
        path = "/".join(rng.choice(words).lower() for _ in range(rng.randint(0, 4)))
        query = f"?{rng.choice(words).lower()}={number()}" if rng.random() < 0.5 else ""
        host = f"{rng.choice(words).lower()}.{rng.choice(('com', 'org', 'io', 'ru'))}"
        return f"https://{host}/{path}{query}"

    def run() -> str:
        return rng.choice(("\n", " ", "-", "=", "*", "!", ".", "#", "\t", "ha", "a")) * rng.randint(
            2, 80
        )

    makers = (number, blob, glyphs, url, run, lambda: rng.choice(words))
    texts = []
    for _ in range(count):
        parts = [rng.choice(makers)() for _ in range(rng.randint(1, 60))]
        texts.append(
            "".join(part + rng.choice((" ", " ", ", ", "\n", "")) for part in parts).strip()
        )
    return [text for text in texts if text]


_EMOJI_RANGES = ((0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F680, 0x1F6FF), (0x2600, 0x26FF))


def make_samples(
    corpus: Sequence[dict[str, Any]], *, supplement: bool = True, seed: int = 0
) -> list[Sample]:
    """Corpus texts, their snippets, synthetic texts and (optionally) the Django supplement."""
    samples = [
        Sample(row["lang"], row["text"], f"corpus:{row.get('source', index)}", "corpus")
        for index, row in enumerate(corpus)
    ]
    for index, row in enumerate(short_snippets(corpus, per_text=2, seed=seed)):
        samples.append(
            Sample(row["lang"], row["text"], f"corpus:{row.get('source', index)}", "snippet")
        )
    for index, text in enumerate(synthetic_texts(corpus, count=300, seed=seed)):
        samples.append(Sample("synthetic", text, f"synthetic:{index % 7}", "synthetic"))
    if supplement:
        for index, row in enumerate(django_supplement(seed)):
            samples.append(
                Sample(row["lang"], row["text"], f"{row['source']}:{index % 7}", "supplement")
            )
    return [sample for sample in samples if sample.text]


def sample_weights(samples: Sequence[Sample]) -> np.ndarray:
    """Every (kind, language) gets a fixed total weight, shared by its texts."""
    totals = {
        "corpus": 1.0,
        "snippet": SNIPPET_WEIGHT,
        "supplement": SUPPLEMENT_WEIGHT,
        "synthetic": SYNTHETIC_WEIGHT,
    }
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for sample in samples:
        counts[sample.kind, sample.lang] += 1
    return np.array([totals[s.kind] / counts[s.kind, s.lang] for s in samples])


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
