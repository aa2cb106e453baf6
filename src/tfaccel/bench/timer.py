"""Measurement you can trust: warm-up apart, device synced, repeats kept, noise flagged.

`measure()` calls `fn` once to warm up (tracing and XLA compilation are timed and
reported apart), then `repeats` times `number` calls, synchronising the device before
each clock read. A `Measurement` keeps every raw sample; its median and spread are
derived, and a spread above 10 % carries a warning.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfaccel import stats


@dataclass(frozen=True)
class Skipped:
    """A benchmark that does not apply on this machine, and why (it measures nothing)."""

    why: str


@dataclass(frozen=True)
class Measurement:
    name: str
    unit: str  # e.g. "TFLOP/s", "GB/s", "us", "img/s"
    samples: tuple[float, ...]  # one value per repeat
    higher_is_better: bool = True
    warmup_s: float | None = None  # the first call: tracing, compilation, autotuning
    params: dict[str, Any] = field(default_factory=dict)
    peak: float | None = None  # the GPU's peak in the same unit, where one applies
    telemetry: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def median(self) -> float | None:
        return stats.median(self.samples)

    @property
    def spread(self) -> float | None:
        """The samples' spread (stats.spread: interquartile range / median)."""
        return stats.spread(self.samples)

    @property
    def percent_of_peak(self) -> float | None:
        median = self.median
        return 100.0 * median / self.peak if median is not None and self.peak else None

    @property
    def warnings(self) -> tuple[str, ...]:
        out = []
        if self.spread is not None and self.spread > stats.NOISY:
            out.append(f"noisy: spread {self.spread:.0%} of the median")
        if self.telemetry.get("throttled"):
            out.append(
                "the GPU throttled during the run: "
                + ", ".join(self.telemetry.get("throttle_reasons", []))
            )
        return tuple(out)


def start_gpu_sampler(interval_s: float) -> Any:
    """A light NVML sampler on the GPUs TensorFlow uses (its GPU:0 is the first), started;
    None where NVML cannot start (no driver): the benchmark runs without telemetry."""
    try:
        from tfaccel.monitor.sampler import Sampler

        sampler = Sampler("visible", interval_s=interval_s, light=True)
        sampler.start()
        return sampler
    except Exception:
        return None


def measure(
    name: str,
    fn: Callable[[], Any],
    *,
    work: float,
    unit: str,
    sync: Callable[[Any], None] = lambda _: None,
    repeats: int = 7,
    number: int = 10,
    higher_is_better: bool = True,
    per_call_time: bool = False,
    clock: Callable[[], float] = time.perf_counter,
    params: dict[str, Any] | None = None,
    peak: float | None = None,
) -> Measurement:
    """Time `fn`.

    Args:
        work: units of work one call does (FLOP/1e12 for TFLOP/s, bytes/1e9 for GB/s,
            samples for img/s). Ignored with per_call_time.
        per_call_time: report microseconds per call (lower is better) instead of a rate.
        sync: waits for the device to finish the result (called before each clock read).
    """
    started = clock()
    sync(fn())
    warmup = clock() - started
    samples = []
    for _ in range(repeats):
        start = clock()
        out = None
        for _ in range(number):
            out = fn()
        sync(out)
        elapsed = max(clock() - start, 1e-12)
        samples.append(elapsed / number * 1e6 if per_call_time else work * number / elapsed)
    return Measurement(
        name,
        "us" if per_call_time else unit,
        tuple(samples),
        higher_is_better=not per_call_time and higher_is_better,
        warmup_s=warmup,
        params=dict(params or {}),
        peak=peak,
    )
