"""One spread and one noise rule: tune, bench and profile compute the same figure."""

from __future__ import annotations

import pytest

from tfaccel import stats
from tfaccel.bench.timer import Measurement
from tfaccel.optimize.settings import Settings
from tfaccel.profile.report import StepBreakdown
from tfaccel.trial.runner import summarize

# five timed windows with one slow one (img/s)
WINDOWS = (5134.0, 4608.0, 5241.0, 5355.0, 5336.0)


def test_the_spread_is_the_inclusive_iqr_over_the_median() -> None:
    assert stats.spread(WINDOWS) == pytest.approx((5336 - 5134) / 5241)  # 3.9 %
    assert stats.spread((100.0, 104.0)) == pytest.approx(4 / 102)  # few: the range
    assert stats.spread((100.0,)) is None and stats.spread(()) is None
    assert stats.spread((0.0, 0.0, 0.0)) is None  # no median to divide by


def test_tune_bench_and_profile_share_it() -> None:
    trial = summarize("k", Settings(), {"status": "ok", "window_samples_per_s": WINDOWS}, 1.0)
    bench = Measurement("m", "img/s", WINDOWS)
    # profile's step times: the same numbers as milliseconds
    from tests.profile.test_profile import _synthetic

    steps = tuple(StepBreakdown(str(i), t, {}) for i, t in enumerate(WINDOWS))
    profiled = _synthetic(steps=steps)
    expected = stats.spread(WINDOWS)
    assert trial.spread == bench.spread == profiled.step_spread == expected


def test_noise_threshold_is_the_floor_or_twice_the_larger_spread() -> None:
    assert stats.noise_threshold() == stats.NOISE_FLOOR
    assert stats.noise_threshold(0.01, None) == stats.NOISE_FLOOR
    assert stats.noise_threshold(0.02, 0.05) == pytest.approx(0.10)
    assert stats.noise_threshold(0.0, floor=0.005) == 0.005


def test_repeats_settle_when_their_spread_keeps_the_threshold_at_the_floor() -> None:
    assert stats.settled([100.0, 101.0, 100.5])  # 1 % range: threshold stays at 3 %
    assert not stats.settled([100.0, 102.0, 100.5])  # 2 %: it would be 4 %
    assert not stats.settled([100.0, 100.0])  # two repeats are not enough
    assert stats.settled([100.0, 104.0, 100.5], floor=0.1)


def test_rising_repeats_are_a_warm_up_that_had_not_ended() -> None:
    from tfaccel.stats import rising

    assert rising([100, 104, 109, 115])
    assert not rising([100, 104])  # too few to tell
    assert not rising([100, 104, 103, 110])  # not each above the one before
    assert not rising([100.0, 100.5, 101.0])  # within the noise floor
