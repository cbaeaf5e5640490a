"""The local token estimator: a counter for any language without the model's tokenizer.

``EstimatorCounter.count(text) = ceil(sum(coefficient[f] * feature[f](text)))`` over the
features of :mod:`chatplatform.core.tokens.features`. Coefficients, the lexicon and the safety
margin are data, fitted against a reference BPE by :mod:`tooling.estimator_fitting.fitting` and
shipped as ``estimator_coefficients.json`` (plus the gzipped lexicon it names).

The estimate is unbiased-ish per text, not an upper bound. Callers that must not overflow a
context window multiply by the margin: :meth:`EstimatorCounter.with_margin`.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import math
from collections.abc import Mapping
from operator import mul
from pathlib import Path
from typing import Any

from .base import CounterNotAvailable, TokenCounter
from .features import FEATURE_NAMES, SCRIPTS, extract_features

PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_COEFFICIENTS_PATH = PACKAGE_DIR / "estimator_coefficients.json"
FORMAT_VERSION = 1

# When two texts are joined at whitespace, only runs of whitespace can merge (newlines,
# blanks) and the last punctuation run of the first text can change what follows it.
WHITESPACE_SEAM_FEATURES = ("newline_runs_not_after_punct", "space_runs_ge2")
PUNCT_RUN_FEATURES = ("punct_runs_before_letter", "punct_runs_before_newline", "punct_runs_other")
# When they are joined anywhere, any run or pair may also be cut in two.
SEAM_FEATURES = (
    *PUNCT_RUN_FEATURES,
    *WHITESPACE_SEAM_FEATURES,
    "digit_runs",
    "digit_runs_ge4_ge7",
    "digit_runs_ge4_ge7",
    "digit_runs_ge10",
    "percent_escapes",
)
# Counts that change by at most one (two for oov_words) when a word is cut in two.
WORD_SEAM_FEATURES = (
    "lexicon_words",
    "oov_words",
    "oov_words",
    "camel_humps",
    "latin_runs_ge4",
    "latin_runs_ge8",
    "latin_runs_ge12",
    "cjk_runs",
)
# Per-letter features of out-of-lexicon words: when a lexicon word is cut, its letters start
# to count, at most at the dearest rate (a Latin letter pays latin_chars, maybe latin_upper,
# and at most one of latin_accented / latin_extended).
LATIN_CHAR_FEATURES = ("latin_chars", "latin_upper", "latin_accented", "latin_extended")
LETTER_CHAR_FEATURES = (
    *(f"{script}_chars" for script in SCRIPTS),
    "han_chars",
    "kana_chars",
)
assert set(SEAM_FEATURES + WORD_SEAM_FEATURES + LATIN_CHAR_FEATURES + LETTER_CHAR_FEATURES) <= set(
    FEATURE_NAMES
)


class EstimatorCounter(TokenCounter):
    """Estimated tokens of the reference encoding, from a fitted linear model.

    Contract, beyond :class:`TokenCounter`'s:

    - ``count(text)`` is an integer >= 0, 0 only for the empty string (and texts whose
      features are all zero-weighted), and does not depend on other calls;
    - ``margin`` (>= 1) is the ratio reference/estimate that at most 0.5 % of held-out
      texts exceeded when fitted; ``with_margin(n) = ceil(n * margin)``;
    - ``count(a) + count(b)`` is within ``seam_tolerance`` of ``count(a + b)`` when ``a``
      ends or ``b`` starts with whitespace, and within ``word_seam_tolerance`` for any cut.
    """

    exact = False

    def __init__(
        self,
        coefficients: Mapping[str, float],
        lexicon: frozenset[bytes],
        *,
        version: str,
        reference: str,
        margin: float,
        message_overhead: int = 4,
        max_lexicon_word_chars: int = 0,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        unknown = set(coefficients) - set(FEATURE_NAMES)
        if unknown:
            raise ValueError(f"coefficients for unknown features: {sorted(unknown)}")
        if any(value < 0 for value in coefficients.values()):
            raise ValueError("coefficients must be non-negative")
        if margin < 1:
            raise ValueError("margin must be >= 1")
        self.name = f"estimator-{version}"
        self.version = version
        self.reference = reference
        self.margin = float(margin)
        self.message_overhead = message_overhead
        self.coefficients = {name: float(coefficients.get(name, 0.0)) for name in FEATURE_NAMES}
        self.metadata = dict(metadata or {})
        self._weights = tuple(self.coefficients[name] for name in FEATURE_NAMES)
        self._lexicon = lexicon
        punct = [self.coefficients[f] for f in PUNCT_RUN_FEATURES]
        # 2: each of the two parts' counts rounds up once, the joined text's once.
        self.seam_tolerance = 2 + math.ceil(
            sum(self.coefficients[f] for f in WHITESPACE_SEAM_FEATURES) + max(punct) - min(punct)
        )
        latin, upper, accented, extended = (self.coefficients[f] for f in LATIN_CHAR_FEATURES)
        per_char = max(
            latin + upper + max(accented, extended),
            *(self.coefficients[f] for f in LETTER_CHAR_FEATURES),
        )
        script_runs = max(
            (value for name, value in self.coefficients.items() if name.endswith("_runs")),
            default=0.0,
        )
        self.word_seam_tolerance = 1 + math.ceil(
            sum(self.coefficients[f] for f in SEAM_FEATURES + WORD_SEAM_FEATURES)
            + 2 * script_runs
            + per_char * max_lexicon_word_chars
        )

    def count(self, text: str) -> int:
        if not text:
            return 0
        features = extract_features(text, self._lexicon)
        # the tiny slack keeps float noise from rounding an exact integer up
        return max(0, math.ceil(sum(map(mul, self._weights, features)) - 1e-9))

    def with_margin(self, estimate: int) -> int:
        """``estimate`` scaled by the safety margin, rounded up (tokens)."""
        return math.ceil(estimate * self.margin - 1e-9)

    @classmethod
    def from_file(cls, path: Path | str) -> EstimatorCounter:
        """Load coefficients JSON and the lexicon file it names (beside it)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CounterNotAvailable(f"cannot read estimator coefficients {path}: {exc}") from exc
        if data.get("format") != FORMAT_VERSION:
            raise CounterNotAvailable(f"unsupported estimator format in {path}")
        lexicon = load_lexicon(path.parent / data["lexicon"]["file"], data["lexicon"]["sha256"])
        return cls(
            data["coefficients"],
            lexicon,
            version=data["version"],
            reference=data["reference"],
            margin=data["margin"],
            message_overhead=data.get("message_overhead", 4),
            max_lexicon_word_chars=data["lexicon"].get("max_word_chars", 0),
            metadata=data,
        )


def load_lexicon(path: Path, sha256: str | None = None) -> frozenset[bytes]:
    """Words (UTF-8, one a line, gzipped) the reference BPE encodes as one token."""
    try:
        packed = path.read_bytes()
    except OSError as exc:
        raise CounterNotAvailable(f"cannot read estimator lexicon {path}: {exc}") from exc
    if sha256 is not None and hashlib.sha256(packed).hexdigest() != sha256:
        raise CounterNotAvailable(f"estimator lexicon {path} does not match its checksum")
    return frozenset(gzip.decompress(packed).split(b"\n")) - {b""}


@functools.lru_cache(maxsize=1)
def load_default_estimator() -> EstimatorCounter:
    """The packaged estimator (shared; loading reads ~0.3 MB once)."""
    return EstimatorCounter.from_file(DEFAULT_COEFFICIENTS_PATH)
