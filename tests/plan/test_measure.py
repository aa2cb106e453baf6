"""Real peak measurement (GPU) and the bisection that finds the largest batch (CPU)."""

from __future__ import annotations

import pytest

from tfaccel.errors import InputError
from tfaccel.plan.measure import find_max_batch, measure_peak


def test_bisection_finds_the_boundary() -> None:
    calls: list[int] = []

    def fits(b: int) -> bool:
        calls.append(b)
        return b <= 1234

    best, probed = find_max_batch(fits, 1000, 2000, tolerance=0.0, max_probes=20)
    assert best == 1234 and probed == calls
    best, probed = find_max_batch(fits, 1000, 2000, tolerance=0.03, max_probes=20)
    assert 1234 - 30 <= best <= 1234 and len(probed) < 6


def test_measure_rejects_bad_batches() -> None:
    with pytest.raises(InputError):
        measure_peak("tiny", "float32", 0)


@pytest.mark.gpu
def test_measured_peak_on_the_gpu_holds_weights_and_optimizer() -> None:
    from tfaccel.plan.child import estimate_in_child

    est = estimate_in_child("tiny", "float32")
    m = measure_peak("tiny", "float32", 256, steps=2)
    assert m.error is None and not m.oom, m.error
    assert m.peak_bytes is not None
    assert m.peak_bytes >= est.weights_bytes + est.optimizer_bytes
