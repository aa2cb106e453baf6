"""How long training takes at a given throughput, and how the options change it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tfaccel.errors import InputError
from tfaccel.plan.fit import REMAT_TIME_COST


@dataclass(frozen=True)
class TimeRow:
    label: str
    samples_per_s: float
    seconds: float


@dataclass(frozen=True)
class TrainTime:
    samples: int
    epochs: float
    throughput: float
    rows: tuple[TimeRow, ...]


def human_duration(seconds: float) -> str:
    """3725 -> '1 h 02 min'."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = seconds / 60
    if minutes < 60:
        return f"{minutes:.0f} min"
    hours, mins = divmod(round(minutes), 60)
    if hours < 48:
        return f"{hours} h {mins:02d} min"
    return f"{hours / 24:.1f} days"


def time_to_train(
    throughput: float,
    samples: int,
    epochs: float,
    gpus: int | Sequence[int] = (),
    scaling_efficiency: float = 0.9,
) -> TrainTime:
    """Training time at `throughput` samples/s, and with the options that change it.

    Args:
        throughput: measured or benchmarked samples per second on one GPU.
        gpus: also show data parallelism on these GPU counts (2, 4 and 8 always).
        scaling_efficiency: N-GPU throughput / (N x 1-GPU throughput) for that row.
    """
    if throughput <= 0 or samples <= 0 or epochs <= 0:
        raise InputError(
            "Throughput, samples and epochs must be positive",
            expected="numbers > 0",
            received=f"throughput={throughput}, samples={samples}, epochs={epochs}",
        )
    if not 0 < scaling_efficiency <= 1:
        raise InputError(
            "Scaling efficiency is out of range",
            expected="a fraction in (0, 1]",
            received=scaling_efficiency,
        )
    total = samples * epochs
    rows = [TimeRow("as measured", throughput, total / throughput)]
    remat = throughput / (1 + REMAT_TIME_COST)
    rows.append(
        TimeRow("with gradient checkpointing (one more forward pass)", remat, total / remat)
    )
    rows.append(
        TimeRow(
            "with gradient accumulation (same samples/s, fewer optimizer steps)",
            throughput,
            total / throughput,
        )
    )
    for count in sorted({2, 4, 8, *([gpus] if isinstance(gpus, int) else gpus)} - {1}):
        rate = throughput * count * scaling_efficiency
        rows.append(
            TimeRow(
                f"on {count} GPUs at {scaling_efficiency:.0%} scaling efficiency",
                rate,
                total / rate,
            )
        )
    return TrainTime(samples, epochs, throughput, tuple(rows))
