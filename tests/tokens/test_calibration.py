"""Online calibration: Welford statistics, nonsense filtering, estimate and margin."""

from __future__ import annotations

import math
import statistics

from hypothesis import given
from hypothesis import strategies as st

from chatplatform.core.tokens.calibration import (
    MIN_SAMPLES,
    Z_995,
    CalibrationState,
    calibrated_estimate,
    calibrated_margin,
    update,
)

observations = st.lists(
    st.tuples(st.integers(1, 5000), st.floats(0.5, 2.0)).map(
        lambda p: (p[0], max(1, round(p[0] * p[1])))
    ),
    min_size=2,
    max_size=60,
)


def replay(pairs):
    state = CalibrationState()
    for estimated, actual in pairs:
        state = update(state, estimated, actual)
    return state


@given(observations)
def test_matches_batch_mean_and_variance(pairs):
    state = replay(pairs)
    ratios = [actual / estimated for estimated, actual in pairs]
    assert state.count == len(pairs)
    assert math.isclose(state.mean, statistics.fmean(ratios), rel_tol=1e-9)
    assert math.isclose(state.variance, statistics.variance(ratios), rel_tol=1e-6, abs_tol=1e-12)


def test_state_is_immutable_and_update_returns_a_new_one():
    state = CalibrationState()
    new = update(state, 100, 110)
    assert state == CalibrationState() and new.count == 1 and new.mean == 1.1


def test_nonsense_observations_are_ignored():
    state = update(CalibrationState(), 100, 120)
    for estimated, actual in [(0, 10), (10, 0), (-5, 10), (100, 5), (10, 1000)]:
        assert update(state, estimated, actual) == state


def test_estimate_is_scaled_only_once_enough_samples_exist():
    state = CalibrationState()
    for _ in range(MIN_SAMPLES - 1):
        state = update(state, 100, 120)
    assert calibrated_estimate(1000, state) == 1000
    state = update(state, 100, 120)
    assert calibrated_estimate(1000, state) == 1200
    assert calibrated_estimate(0, state) == 0


def test_margin_is_the_base_until_ready_then_a_prediction_bound():
    state = replay([(100, 110)] * (MIN_SAMPLES - 1))
    assert calibrated_margin(state, 1.07) == 1.07
    state = replay([(100, 110), (100, 130)] * MIN_SAMPLES)
    expected = state.mean + Z_995 * state.stddev * math.sqrt(1 + 1 / state.count)
    assert math.isclose(calibrated_margin(state, 1.07), expected)
    assert expected > 1.07


@given(observations)
def test_margin_never_below_base(pairs):
    assert calibrated_margin(replay(pairs), 1.1) >= 1.1
