"""Online calibration of estimated prompt tokens against what the provider reports.

The estimator is fitted to a public encoding; a model whose tokenizer is private (or just
different) counts more or fewer tokens. Every reply tells us the real prompt size, so we
keep running statistics of ``ratio = actual / estimated`` per (tenant, model) and use them:

- :func:`update` folds one observation into an immutable :class:`CalibrationState`
  (Welford's algorithm: count, mean and M2, the sum of squared deviations);
- :func:`calibrated_estimate` scales an estimate by the mean ratio, once
  :data:`MIN_SAMPLES` observations exist;
- :func:`calibrated_margin` gives the factor that bounds the actual count from an
  (uncalibrated) estimate: an upper prediction bound of the ratio, never below the
  estimator's own fitted margin.

Everything here is pure arithmetic on floats; storing the state is the caller's business.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_SAMPLES = 5
# One-sided 99.5 % normal quantile: the margin should be beaten by at most 0.5 % of prompts.
Z_995 = 2.576
# Ratios outside this range are not tokenizer differences but broken reports (cached
# prompts, truncated requests, estimates of the wrong text): they are ignored.
MIN_RATIO = 1 / 8
MAX_RATIO = 8.0


@dataclass(frozen=True)
class CalibrationState:
    """Running statistics of ``actual / estimated`` prompt tokens (immutable)."""

    count: int = 0
    mean: float = 1.0
    m2: float = 0.0

    @property
    def variance(self) -> float:
        """Sample variance of the ratio (0 with fewer than two observations)."""
        return self.m2 / (self.count - 1) if self.count > 1 else 0.0

    @property
    def stddev(self) -> float:
        return math.sqrt(self.variance)

    @property
    def ready(self) -> bool:
        """Enough observations to trust the mean."""
        return self.count >= MIN_SAMPLES


def update(state: CalibrationState, estimated: int, actual: int) -> CalibrationState:
    """Return ``state`` with one more observation; nonsense observations change nothing.

    Nonsense: a non-positive estimate or actual count, or a ratio outside
    [``MIN_RATIO``, ``MAX_RATIO``].
    """
    if estimated <= 0 or actual <= 0:
        return state
    ratio = actual / estimated
    if not MIN_RATIO <= ratio <= MAX_RATIO:
        return state
    count = state.count + 1
    mean = ratio if state.count == 0 else state.mean + (ratio - state.mean) / count
    m2 = state.m2 + (ratio - state.mean) * (ratio - mean) if state.count else 0.0
    return CalibrationState(count=count, mean=mean, m2=m2)


def calibrated_estimate(estimate: int, state: CalibrationState) -> int:
    """``estimate`` scaled by the mean ratio (rounded up), or unchanged until ready."""
    if estimate <= 0 or not state.ready:
        return max(estimate, 0)
    return math.ceil(estimate * state.mean - 1e-9)


def calibrated_margin(state: CalibrationState, base_margin: float, z: float = Z_995) -> float:
    """Factor for an *uncalibrated* estimate that the actual count rarely exceeds.

    Until :data:`MIN_SAMPLES` observations exist this is ``base_margin`` (the estimator's
    fitted margin, which assumes the provider counts like the reference encoding). Then it
    is the upper prediction bound ``mean + z * stddev * sqrt(1 + 1 / count)`` of the next
    ratio (the square root widens the bound while the mean itself is uncertain), and never
    less than ``base_margin``: a few lucky observations must not shrink the safety margin.
    """
    if not state.ready:
        return base_margin
    bound = state.mean + z * state.stddev * math.sqrt(1 + 1 / state.count)
    return max(base_margin, bound)
