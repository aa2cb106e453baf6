"""One definition of a measurement's spread and one noise rule, for every command.

A figure is a median over repeats (timed windows, bench repeats, profiled steps); its
spread is the interquartile range over the median, as torch.utils.benchmark reports,
so one slow repeat (a hiccup of the host) does not set the noise. With fewer than four
repeats there are no quartiles, and the range over the median stands in.

Two figures differ only past `noise_threshold`: tune keeps a change, scale's search
keeps an option, and `bench compare` / `profile diff` call a change better or worse,
only beyond it.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable

NOISY = 0.10  # a spread above this flags a measurement as noisy
NOISE_FLOOR = 0.03  # the smallest relative change called a gain or a loss
BUSY = 0.20  # a spread above this says the machine was busy with other work


def median(samples: Iterable[float]) -> float | None:
    """The median of `samples`, None when there are none."""
    xs = list(samples)
    return statistics.median(xs) if xs else None


def spread(samples: Iterable[float]) -> float | None:
    """Interquartile range / median (inclusive quartiles); (max - min) / median with
    two or three samples; None with fewer, or a zero median.

    Five windows of 5134, 4608, 5241, 5355 and 5336 samples/s have a 14 % range, which
    would call every gain under 29 % noise; their IQR is 3.9 %."""
    xs = sorted(float(x) for x in samples)
    if len(xs) < 2:
        return None
    mid = statistics.median(xs)
    if not mid:
        return None
    if len(xs) < 4:
        return (xs[-1] - xs[0]) / abs(mid)
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return (q3 - q1) / abs(mid)


def noise_threshold(*spreads: float | None, floor: float = NOISE_FLOOR) -> float:
    """How far apart two figures must be to differ beyond their noise: `floor`, or
    twice the larger spread, whichever is more."""
    return max(floor, 2 * max((spread_value or 0.0 for spread_value in spreads), default=0.0))


def settled(samples: Iterable[float], floor: float = NOISE_FLOOR) -> bool:
    """Have repeats settled: three or more, with a spread of at most half `floor`, so
    that a comparison with them keeps its threshold (twice the spread) at the floor?"""
    xs = list(samples)
    found = spread(xs)
    return len(xs) >= 3 and found is not None and found <= floor / 2


def rising(samples: Iterable[float], floor: float = NOISE_FLOOR) -> bool:
    """Do repeats still climb: three or more, each above the one before, the last above
    the first by more than `floor` (a warm-up that had not ended: caches filling, the
    clocks going up, an allocator still growing)?"""
    xs = list(samples)
    if len(xs) < 3 or not xs[0]:
        return False
    steps_up = all(later > earlier for earlier, later in itertools.pairwise(xs))
    return steps_up and xs[-1] / xs[0] - 1 > floor
