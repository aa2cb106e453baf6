"""Scaling efficiency: the same workload on 1, 2, ... N GPUs, global batch scaled per replica.

Each point is a fresh trial process that sees only its first n GPUs (CUDA_VISIBLE_DEVICES)
and trains with MirroredStrategy through tfaccel's data-parallel step (XLA per replica),
or through Keras `fit` with `engine="fit"`, for comparison.
Efficiency = N-GPU throughput / (N x 1-GPU throughput).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tfaccel.errors import InputError
from tfaccel.optimize.settings import Settings
from tfaccel.tune.runner import StepPlan, TrialResult, run_trial


@dataclass(frozen=True)
class ScalePoint:
    gpus: int
    global_batch: int
    samples_per_s: float | None
    efficiency: float | None
    engine: str | None
    status: str
    error: str | None = None


@dataclass(frozen=True)
class ScaleReport:
    workload: str
    per_replica_batch: int
    settings: dict[str, Any]
    points: tuple[ScalePoint, ...]
    topology: Any = None
    topology_warnings: tuple[str, ...] = ()
    gpu_names: tuple[str, ...] = ()


def gpu_counts(visible: int, requested: Sequence[int] | None) -> list[int]:
    """1, 2, 4, ... up to `visible` (and `visible` itself), or the requested counts."""
    if requested:
        bad = [n for n in requested if n < 1 or n > visible]
        if bad:
            raise InputError(
                f"Cannot run on {bad[0]} GPU(s)",
                expected=f"counts between 1 and the {visible} visible GPU(s)",
                received=list(requested),
                hint="tfaccel hw lists the GPUs this process can see",
            )
        return sorted(set(requested))
    counts, n = [], 1
    while n <= visible:
        counts.append(n)
        n *= 2
    if visible and visible not in counts:
        counts.append(visible)
    return counts


def run_scale(
    workload: str,
    counts: Sequence[int],
    settings: Settings,
    steps: StepPlan,
    engine: str = "auto",
    cpu_replicas: bool = False,
    timeout_s: float = 900.0,
    on_point: Callable[[int, TrialResult | None], None] | None = None,
    trial_fn: Callable[..., TrialResult] = run_trial,
) -> list[ScalePoint]:
    """Measure each GPU count; `cpu_replicas` splits the CPU instead (tests, no GPU)."""
    points: list[ScalePoint] = []
    base: float | None = None
    for n in counts:
        if on_point:
            on_point(n, None)
        # One engine for every point: with engine "auto" the 1-GPU point runs the same
        # tfaccel step (a one-replica MirroredStrategy) as the others, so efficiency
        # compares like with like; "fit" measures Keras fit at every count.
        s = settings.replace(strategy="mirrored" if n > 1 or engine != "fit" else "none")
        extra: dict[str, Any] = {"engine": engine}
        env: dict[str, str] = {}
        if cpu_replicas:
            extra["logical_cpus"] = n
        else:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(n))
        r = trial_fn(workload, s, steps, timeout_s, extra=extra, env_overrides=env)
        if on_point:
            on_point(n, r)
        rate = r.samples_per_s if r.ok else None
        if n == 1 and rate:
            base = rate
        eff = rate / (n * base) if rate and base else None
        points.append(
            ScalePoint(
                n,
                (s.batch_size or 32) * n,
                rate,
                eff,
                r.extra.get("engine", "keras fit" if n == 1 else engine),
                r.status,
                r.error,
            )
        )
    return points
