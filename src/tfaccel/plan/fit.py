"""Will a model fit a GPU at a batch size, and what to do when it does not."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tfaccel.errors import InputError
from tfaccel.hardware import specs as specmod
from tfaccel.plan.memory import MemoryEstimate

# Rematerialisation recomputes the forward pass in the backward pass: about one more
# forward, i.e. a third more compute per step (forward ~ 1/3 of a training step).
REMAT_TIME_COST = 1.0 / 3.0


@dataclass(frozen=True)
class Capacity:
    """How much memory a training process may use, and where that figure comes from."""

    name: str
    bytes: int
    source: str


@dataclass(frozen=True)
class Suggestion:
    """One way to make the model fit, with what it gives."""

    action: str
    detail: str
    max_batch: int | None = None
    effective_batch: int | None = None
    command: str | None = None


@dataclass(frozen=True)
class FitPlan:
    estimate: MemoryEstimate
    capacity: Capacity
    margin: float
    batch: int | None
    peak_bytes_at_batch: int | None
    fits: bool | None
    max_batch: int
    batch_table: tuple[tuple[int, int], ...]  # (batch, predicted peak bytes)
    suggestions: tuple[Suggestion, ...]
    # whose batch `batch` is: "asked" (--batch), or "the script's" (its fit's own)
    batch_from: str = "asked"


def capacity_from_spec(name: str) -> Capacity:
    spec = specmod.get_spec(name)
    return Capacity(
        spec.key, int(spec.memory_gb * 1e9), f"spec file: {spec.key} {spec.memory_gb:g} GB"
    )


def capacity_from_local(indices: Sequence[int] | None = None, lib: Any = None) -> Capacity:
    """Free memory of local GPUs (NVML), by NVML index as nvidia-smi numbers them; of
    several, the one with the least (a data-parallel replica must fit on each). Without
    `indices`, the first GPU TensorFlow sees (CUDA_VISIBLE_DEVICES' order). A GPU that
    TensorFlow does not see here is an InputError: the plan would be for another GPU."""
    from tfaccel.errors import GpuError
    from tfaccel.hardware.capabilities import visible_indices
    from tfaccel.hardware.inventory import read_inventory

    try:
        inv = read_inventory(lib)
    except GpuError as exc:  # NVML could not start: spec data needs no GPU
        exc.hint = (
            "tfaccel doctor explains why; plan from spec data without a GPU: "
            "tfaccel plan MODEL --spec H200 (tfaccel hw --list-specs names them)"
        )
        raise
    visible = visible_indices([gpu.uuid for gpu in inv.gpus])
    if not visible:
        raise GpuError(
            "No GPU to plan for",
            expected="a visible NVIDIA GPU, or --spec NAME from the spec file",
            received=f"0 of {len(inv.gpus)} GPU(s) visible (CUDA_VISIBLE_DEVICES)"
            if inv.gpus
            else "0 GPUs",
            hint="tfaccel plan --spec H200",
        )
    chosen = list(indices) if indices else visible[:1]
    unseen = [i for i in chosen if i not in visible]
    if unseen:
        raise InputError(
            f"GPU {unseen[0]} is not one TensorFlow sees here",
            expected="--gpu-index of "
            + ", ".join(map(str, sorted(visible)))
            + " (nvidia-smi's numbers)",
            received=",".join(map(str, chosen)),
            hint=None if len(visible) == len(inv.gpus) else "CUDA_VISIBLE_DEVICES hides the others",
        )
    gpus = [gpu for gpu in inv.gpus if gpu.index in chosen]
    gpu = min(gpus, key=lambda x: x.memory_free_mib or x.memory_total_mib or 0)
    free = (gpu.memory_free_mib or gpu.memory_total_mib or 0) * 2**20
    return Capacity(
        gpu.name or f"GPU {gpu.index}",
        free,
        f"local GPU {gpu.index} ({gpu.name}), free memory {free / 2**30:.1f} GiB",
    )


def plan_fit(
    estimate: MemoryEstimate,
    capacity: Capacity,
    batch: int | None = None,
    margin: float = 0.10,
    alternatives: Callable[[str], MemoryEstimate | None] | None = None,
    half_precision: str = "mixed_bfloat16",
) -> FitPlan:
    """Judge the fit and list the options that make it fit.

    Args:
        alternatives: returns the estimate for another precision (traced on demand), or
            None; used to quote mixed precision's max batch.
    """
    if not 0 <= margin < 0.9:
        raise InputError(
            "The safety margin is out of range", expected="a fraction in [0, 0.9)", received=margin
        )
    if batch is not None and batch < 1:
        raise InputError(
            "The batch size must be positive", expected="an integer >= 1", received=batch
        )
    max_b = estimate.max_batch(capacity.bytes, margin)
    peak = estimate.peak_bytes(batch) if batch else None
    fits = None if batch is None else batch <= max_b
    sizes = sorted(
        {size for size in (1, 8, 32, 64, 128, 256, 512, 1024, batch or 1, max_b) if size > 0}
    )
    table = tuple((size, estimate.peak_bytes(size)) for size in sizes)
    suggestions: list[Suggestion] = []
    target = batch or max(1, max_b)
    if fits is False or max_b < 1:
        if estimate.precision == "float32" and alternatives is not None:
            alt = alternatives(half_precision)
            if alt is not None:
                alt_max = alt.max_batch(capacity.bytes, margin)
                suggestions.append(
                    Suggestion(
                        "mixed precision",
                        f"{half_precision}: {alt.step_bytes_per_sample / 2**20:.0f}"
                        f" MiB per sample instead of {estimate.step_bytes_per_sample / 2**20:.0f}",
                        max_batch=alt_max,
                        command=f"tfaccel plan ... --precision {half_precision}",
                    )
                )
        saved = estimate.activations_bytes_per_sample
        best_case = replace(
            estimate,
            step_lines=tuple(
                (fixed, max(0, per_sample - saved)) for fixed, per_sample in estimate.step_lines
            ),
        )
        remat_max = best_case.max_batch(capacity.bytes, margin)
        suggestions.append(
            Suggestion(
                "gradient checkpointing",
                f"recomputes activations in the backward pass (about "
                f"{REMAT_TIME_COST:.0%} more compute); at most {saved / 2**20:.0f} MiB per sample "
                "is saved for backward, so the batch can grow to at most the figure shown",
                max_batch=remat_max,
                command="tfaccel.configure(gradient_checkpointing=True)",
            )
        )
        if max_b >= 1:
            steps = math.ceil(target / max_b)
            micro = math.ceil(target / steps)
            suggestions.append(
                Suggestion(
                    "gradient accumulation",
                    f"{steps} micro-batches of {micro} per optimizer step",
                    max_batch=micro,
                    effective_batch=steps * micro,
                    command=f"tfaccel.configure(gradient_accumulation_steps={steps})",
                )
            )
            replicas = math.ceil(target / max_b)
            suggestions.append(
                Suggestion(
                    "more GPUs",
                    f"{replicas} GPUs with MirroredStrategy, "
                    f"{math.ceil(target / replicas)} samples per GPU (weights and optimizer state "
                    "are replicated)",
                    effective_batch=target,
                )
            )
        bigger = [
            spec
            for spec in specmod.all_specs()
            if estimate.peak_bytes(target) <= spec.memory_gb * 1e9 * (1 - margin)
        ]
        if bigger:
            names = ", ".join(
                f"{spec.key} ({spec.memory_gb:g} GB)"
                for spec in sorted(bigger, key=lambda spec: spec.memory_gb)[:5]
            )
            suggestions.append(Suggestion("a bigger GPU", f"batch {target} fits on: {names}"))
    return FitPlan(estimate, capacity, margin, batch, peak, fits, max_b, table, tuple(suggestions))


def predicted_vs_measured(
    estimate: MemoryEstimate, measured: Sequence[tuple[int, int]]
) -> list[dict[str, float]]:
    """Rows of (batch, predicted, measured, error %) for a validation report."""
    rows = []
    for batch, peak in measured:
        predicted = estimate.peak_bytes(batch)
        rows.append(
            {
                "batch": batch,
                "predicted_bytes": predicted,
                "measured_bytes": peak,
                "error_pct": 100.0 * (predicted - peak) / peak if peak else float("nan"),
            }
        )
    return rows
