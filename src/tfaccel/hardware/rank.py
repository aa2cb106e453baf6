"""Rank GPUs for a workload with a roofline estimate.

Each workload is a number of FLOPs and bytes of memory traffic per sample. On a GPU
its time per sample is max(FLOPs / peak, bytes / bandwidth) at the precision the GPU
would train in, so compute-bound work ranks by tensor throughput and memory-bound work
(small-batch generation) by bandwidth. The estimate is relative, not a prediction of
absolute speed: `tfaccel bench` measures the real thing.

Per-sample figures (multiply-add = 2 FLOPs; training = 3x forward):
- resnet50: 4.1 GMAC forward at 224x224 -> 24.6 GFLOP; `tfaccel plan` traces ~60 MiB of
  activations saved per image in mixed precision, written once and read twice -> ~0.18 GB.
- bert: BERT-base (110 M parameters) at sequence length 128 -> 6 x 110 M x 128 = 84 GFLOP;
  ~70 MiB saved per sequence in 16-bit (traced), written once and read twice -> ~0.2 GB.
- gpt2: GPT-2 124 M generating one token at batch 1 -> 2 x 124 M = 0.25 GFLOP, while every
  weight is read once -> 0.25 GB in 16-bit (memory-bound).
- science: dense float32 linear algebra (TF32 where tensor cores allow), 1 TFLOP per
  "sample", 8 GB of traffic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tfaccel.errors import InputError
from tfaccel.hardware.specs import GpuSpec


@dataclass(frozen=True)
class WorkloadProfile:
    name: str
    description: str
    gflop_per_sample: float
    gbytes_per_sample: float
    precision: str  # "auto16" (bf16/fp16 by capability) or "tf32"
    min_memory_gb: float  # below this the usual set-up does not fit


PROFILES: dict[str, WorkloadProfile] = {
    "resnet50": WorkloadProfile(
        "resnet50", "ResNet-50 training (vision)", 24.6, 0.18, "auto16", 16
    ),
    "bert": WorkloadProfile("bert", "BERT-base training, seq 128 (NLP)", 84.0, 0.2, "auto16", 16),
    "gpt2": WorkloadProfile("gpt2", "GPT-2 124M generation, batch 1", 0.25, 0.25, "auto16", 2),
    "science": WorkloadProfile(
        "science", "dense float32 / TF32 linear algebra", 1000.0, 8.0, "tf32", 8
    ),
}
SCENARIO_PROFILE = {"vision": "resnet50", "nlp": "bert", "science": "science"}


@dataclass(frozen=True)
class RankRow:
    key: str
    precision: str
    peak_tflops: float
    bandwidth_gbs: float
    bound: str  # "compute" or "memory"
    samples_per_s: float  # roofline upper bound
    relative: float  # to the best row
    fits: bool
    samples_per_kw: float  # roofline samples per second per kW of TDP


def precision_for(spec: GpuSpec, want: str) -> tuple[str, float]:
    """The precision a GPU would train in, and its peak TFLOP/s."""
    order = ["tf32", "fp32"] if want == "tf32" else ["bf16", "fp16", "fp32"]
    for precision in order:
        value = spec.peak(precision)
        if value:
            return precision, value
    return "fp32", spec.peak("fp32") or 0.0


def profile(name: str) -> WorkloadProfile:
    if name not in PROFILES:
        raise InputError(
            f"Unknown workload {name!r}",
            expected="one of " + ", ".join(PROFILES),
            received=repr(name),
        )
    return PROFILES[name]


def rank(specs: Sequence[GpuSpec], workload: str) -> list[RankRow]:
    """Rank `specs` for `workload`, best first."""
    prof = profile(workload)
    rows = []
    for spec in specs:
        prec, peak = precision_for(spec, prof.precision)
        t_compute = prof.gflop_per_sample / (peak * 1e3) if peak else float("inf")
        t_memory = prof.gbytes_per_sample / spec.memory_bandwidth_gbs
        step_time = max(t_compute, t_memory)
        rate = 1.0 / step_time if step_time > 0 else 0.0
        rows.append(
            RankRow(
                spec.key,
                prec,
                peak,
                spec.memory_bandwidth_gbs,
                "compute" if t_compute >= t_memory else "memory",
                rate,
                0.0,
                spec.memory_gb >= prof.min_memory_gb,
                rate / spec.tdp_w * 1e3,
            )
        )
    best = max((row.samples_per_s for row in rows), default=0.0) or 1.0
    rows = [RankRow(**{**row.__dict__, "relative": row.samples_per_s / best}) for row in rows]
    return sorted(rows, key=lambda row: (-row.fits, -row.samples_per_s))
