"""Attributing sampled telemetry to a window of training (an epoch)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from tfaccel.monitor.metrics import Snapshot, harmful


@dataclass(frozen=True)
class GpuWindow:
    """One GPU over one window of time."""

    gpu: int
    util_mean: float | None
    util_max: float | None
    mem_peak_mib: float | None
    temp_max_c: float | None
    power_mean_w: float | None
    energy_j: float | None
    throttled_s: float
    throttle_reasons: dict[str, float] = field(default_factory=dict)  # reason -> seconds


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize_window(snaps: Sequence[Snapshot], start: float, end: float) -> list[GpuWindow]:
    """Aggregate the snapshots taken in [start, end] per GPU.

    Energy comes from the driver's energy counter (difference between the first and
    last sample) where it exists, else from the mean power times the duration.
    Throttled time counts each sample's interval while a harmful reason is active.
    """
    inside = [snap for snap in snaps if start <= snap.time <= end]
    if not inside:
        return []
    out = []
    for gpu_index in range(len(inside[0].gpus)):
        rows = [
            snap.gpus[gpu_index]
            for snap in inside
            if gpu_index < len(snap.gpus) and not snap.gpus[gpu_index].error
        ]
        if not rows:
            continue
        util = [row.util_gpu_pct for row in rows if row.util_gpu_pct is not None]
        power = [row.power_w for row in rows if row.power_w is not None]
        energy = None
        counters = [row.energy_j for row in rows if row.energy_j is not None]
        if len(counters) >= 2:
            energy = counters[-1] - counters[0]
        elif power:
            energy = (_mean(power) or 0.0) * (end - start)
        throttled = 0.0
        reasons: dict[str, float] = {}
        for prev, cur in itertools.pairwise(rows):
            bad = harmful(cur.throttle)
            if bad:
                elapsed = cur.time - prev.time
                throttled += elapsed
                for row in bad:
                    reasons[row] = reasons.get(row, 0.0) + elapsed
        out.append(
            GpuWindow(
                gpu=rows[0].index,
                util_mean=_mean(util),
                util_max=max(util) if util else None,
                mem_peak_mib=max(
                    (row.mem_used_mib for row in rows if row.mem_used_mib is not None), default=None
                ),
                temp_max_c=max(
                    (row.temp_c for row in rows if row.temp_c is not None), default=None
                ),
                power_mean_w=_mean(power),
                energy_j=energy,
                throttled_s=throttled,
                throttle_reasons=reasons,
            )
        )
    return out
