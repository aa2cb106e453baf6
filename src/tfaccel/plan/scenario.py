"""`--scenario vision|nlp|science`: the recommended set-up for this machine, and which
GPUs from the spec file would finish a job within a time budget."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from tfaccel.errors import InputError
from tfaccel.hardware import rank as rankmod
from tfaccel.hardware import specs as specmod
from tfaccel.hardware.capabilities import supports

Scenario = Literal["vision", "nlp", "science"]
SCENARIOS: tuple[str, ...] = get_args(Scenario)


@dataclass(frozen=True)
class Recommendation:
    setting: str
    value: str
    why: str


@dataclass(frozen=True)
class Candidate:
    gpu: str
    est_samples_per_s: float  # one GPU, scaled from the reference by the roofline ratio
    gpus_needed: int | None
    hours: float | None


@dataclass(frozen=True)
class ScenarioPlan:
    scenario: str
    gpu_name: str | None
    compute_capability: str | None
    gpu_count: int
    recommendations: tuple[Recommendation, ...]
    candidates: tuple[Candidate, ...]
    basis: str


def _precision(scenario: str, capability: str | None) -> Recommendation:
    if scenario == "science":
        if supports(capability, "tf32"):
            return Recommendation(
                "precision",
                "float32 with TF32 on",
                "TF32 tensor cores (cc >= 8.0) keep float32 range at several "
                "times the float32 rate; turn it off where full float32 "
                "precision is required",
            )
        return Recommendation("precision", "float32", "no TF32 before Ampere (cc 8.0)")
    if capability is None:
        return Recommendation(
            "precision",
            "mixed_bfloat16 on cc >= 8.0, mixed_float16 on 7.x",
            "no local GPU to read the compute capability from",
        )
    if supports(capability, "bf16"):
        return Recommendation(
            "precision", "mixed_bfloat16", "bf16 tensor cores, float32 range, no loss scaling"
        )
    if supports(capability, "tensor_cores"):
        return Recommendation(
            "precision",
            "mixed_float16",
            "fp16 tensor cores (no bf16 before cc 8.0); needs loss scaling",
        )
    return Recommendation("precision", "float32", "no tensor cores before Volta (cc 7.0)")


def plan_scenario(
    scenario: str,
    gpu_name: str | None,
    compute_capability: str | None,
    gpu_count: int,
    mig_capable: bool = False,
    throughput: float | None = None,
    reference_gpu: str | None = None,
    samples: int | None = None,
    epochs: float = 1.0,
    budget_hours: float | None = None,
    scaling_efficiency: float = 0.9,
    specs: Sequence[specmod.GpuSpec] | None = None,
) -> ScenarioPlan:
    """Recommend a set-up for a scenario and list GPUs that meet a time budget."""
    if scenario not in SCENARIOS:
        raise InputError(
            "Unknown scenario", expected="one of " + ", ".join(SCENARIOS), received=repr(scenario)
        )
    if budget_hours is not None and budget_hours <= 0:
        raise InputError(
            "The time budget must be positive", expected="hours > 0", received=budget_hours
        )
    recs = _recommendations(scenario, compute_capability, gpu_count, mig_capable)
    workload = rankmod.SCENARIO_PROFILE[scenario]
    candidates, basis = _candidates(
        workload,
        specs,
        throughput,
        reference_gpu,
        samples,
        epochs,
        budget_hours,
        scaling_efficiency,
    )
    return ScenarioPlan(
        scenario, gpu_name, compute_capability, gpu_count, tuple(recs), tuple(candidates), basis
    )


def _recommendations(
    scenario: str, compute_capability: str | None, gpu_count: int, mig_capable: bool
) -> list[Recommendation]:
    """The set-up for a scenario: precision, XLA, strategy, and the scenario's own."""
    recs = [_precision(scenario, compute_capability)]
    recs.append(
        Recommendation(
            "XLA",
            "jit_compile=True",
            "fuses small ops; the largest single win after mixed precision"
            if scenario != "science"
            else "fuses elementwise work around the linear algebra",
        )
    )
    if gpu_count > 1:
        recs.append(
            Recommendation(
                "strategy",
                f"MirroredStrategy over {gpu_count} GPUs",
                "data parallelism on one host (NCCL all-reduce)",
            )
        )
    else:
        recs.append(
            Recommendation("strategy", "OneDeviceStrategy (no strategy needed)", "one GPU visible")
        )
    if scenario == "vision":
        recs.append(
            Recommendation(
                "inference",
                "TF-TRT (TensorRT) in FP16/INT8",
                "fuses convolutions for serving; training is unaffected",
            )
        )
        recs.append(
            Recommendation(
                "memory",
                "one large-memory GPU; NVLink when using several",
                "large images and batches are memory-bound",
            )
        )
    if scenario == "nlp":
        recs.append(
            Recommendation(
                "einsum",
                "tfaccel.configure(einsum='flat')",
                "Keras computes each attention projection's weight gradient once per "
                "sequence, then sums them; flat makes it one GEMM ",
            )
        )
        recs.append(
            Recommendation(
                "scale",
                "several GPUs; model parallelism past one GPU's memory",
                "transformers grow past one GPU's memory",
            )
        )
    if scenario == "science" and mig_capable:
        recs.append(
            Recommendation(
                "sharing",
                "MIG partitions for many small jobs",
                "A100/H100-class GPUs split into isolated instances",
            )
        )
    return recs


def _candidates(
    workload: str,
    specs: Sequence[specmod.GpuSpec] | None,
    throughput: float | None,
    reference_gpu: str | None,
    samples: int | None,
    epochs: float,
    budget_hours: float | None,
    scaling_efficiency: float,
) -> tuple[list[Candidate], str]:
    """Every GPU of the spec file, ranked for the workload; with a measured throughput,
    each one's estimate, time, and the GPUs it needs for the budget."""
    all_specs = list(specs or specmod.all_specs())
    ranked = rankmod.rank(all_specs, workload)
    basis = "roofline estimate (relative)"
    candidates: list[Candidate] = []
    ref_rate = None
    if throughput is not None:
        if reference_gpu is None:
            raise InputError(
                "A throughput needs the GPU it was measured on",
                expected="--on GPU (a spec entry, e.g. H200)",
                received="no reference GPU",
            )
        ref = specmod.get_spec(reference_gpu)
        ref_row = next(rank_row for rank_row in rankmod.rank([ref], workload))
        ref_rate = ref_row.samples_per_s
        basis = (
            f"{throughput:g} samples/s measured on {ref.key}, scaled to each GPU by the "
            "roofline ratio"
        )
    for row in ranked:
        est = throughput * row.samples_per_s / ref_rate if (throughput and ref_rate) else 0.0
        needed = hours = None
        if est and samples:
            total = samples * epochs
            hours = total / est / 3600
            if budget_hours:
                # The fewest GPUs whose time (at the scaling efficiency beyond one) fits.
                gpus_needed = (
                    1
                    if hours <= budget_hours
                    else max(2, math.ceil(hours / (budget_hours * scaling_efficiency)))
                )
                needed = gpus_needed if gpus_needed <= 1024 else None
        candidates.append(Candidate(row.key, est, needed, hours))
    if budget_hours and samples and throughput:
        candidates.sort(
            key=lambda candidate: (
                candidate.gpus_needed or math.inf,
                -(candidate.est_samples_per_s),
            )
        )
    return candidates, basis


def local_gpu() -> tuple[str | None, str | None, int, bool]:
    """(name, compute capability, count, MIG-capable) of this machine's first GPU
    (None, None, 0, False without one, or when NVML cannot say)."""
    try:
        from tfaccel.hardware.inventory import read_inventory

        inv = read_inventory()
    except Exception:
        return None, None, 0, False
    if not inv.gpus:
        return None, None, 0, False
    first = inv.gpus[0]
    capability = first.compute_capability
    return (
        first.name,
        capability,
        len(inv.gpus),
        supports(capability, "mig") and first.mig_enabled is not None,
    )
