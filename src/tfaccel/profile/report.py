"""A profile turned into numbers: the report's types, and how a figure is read from it by
name (for gates and diffs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tfaccel import stats

# XProf's step-time categories (input_pipeline_analyzer columns) -> our names.
CATEGORIES = {
    "infeedTimeMs": "input",
    "hostComputeTimeMs": "host_compute",
    "kernelLaunchTimeMs": "kernel_launch",
    "deviceComputeTimeMs": "device_compute",
    "deviceToDeviceTimeMs": "device_to_device",
    "deviceCollectivesTimeMs": "collectives",
    "compileTimeMs": "compilation",
    "outfeedTimeMs": "output",
    "otherTimeMs": "idle_other",
}


@dataclass(frozen=True)
class StepBreakdown:
    step: str
    total_ms: float
    parts_ms: dict[str, float]


@dataclass(frozen=True)
class TopItem:
    name: str
    kind: str
    total_us: float
    count: int
    share_pct: float | None = None
    tensor_core: str | None = None  # "used" / "eligible, not used" / None


@dataclass(frozen=True)
class ProfileReport:
    logdir: str
    run: str
    note: str | None
    hardware: str  # "GPU" / "CPU_ONLY" / ...
    steps: tuple[StepBreakdown, ...]
    step_ms_avg: float | None
    step_ms_std: float | None
    breakdown_pct: dict[str, float]
    gpu_utilization_pct: float | None  # device busy / wall time
    memcpy_pct: float | None  # of device time
    memcpy_us: dict[str, float]  # H2D / D2H / D2D
    launch_latency_us_median: float | None
    launch_latency_us_p90: float | None
    kernel_launches: int | None
    launches_per_step: float | None
    pct_16bit: float | None
    tensor_core_eligible_pct: float | None  # of kernel time, eligible ops
    tensor_core_used_pct: float | None  # of kernel time, kernels using tensor cores
    kernel_avg_us: float | None
    top_kernels: tuple[TopItem, ...]
    top_ops: tuple[TopItem, ...]
    peak_memory_bytes: int | None
    memory_capacity_bytes: int | None
    memory_at_peak_by_op: tuple[tuple[str, int], ...]
    xprof_conclusions: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    samples_per_step: int | None = None  # from the capture (tfaccel.json), if known
    top_op_types: tuple[TopItem, ...] = ()  # device self time summed by op type

    @property
    def samples_per_s(self) -> float | None:
        """Throughput over the profiled steps: comparable across batch sizes."""
        if not self.samples_per_step or not self.step_ms_avg:
            return None
        return self.samples_per_step / self.step_ms_avg * 1000.0

    @property
    def step_spread(self) -> float | None:
        """The step times' spread (stats.spread), None without two timed steps."""
        return stats.spread(step.total_ms for step in self.steps if step.total_ms > 0)

    def metric(self, name: str) -> float | None:
        """Gate/diff metrics by short name."""
        return METRIC_GETTERS[name](self) if name in METRIC_GETTERS else None


METRIC_GETTERS: dict[str, Any] = {
    "utilization": lambda r: r.gpu_utilization_pct,
    "input": lambda r: r.breakdown_pct.get("input"),
    "launch": lambda r: r.breakdown_pct.get("kernel_launch"),
    "memcpy": lambda r: r.memcpy_pct,
    "launch_latency_us": lambda r: r.launch_latency_us_median,
    "sixteen_bit": lambda r: r.pct_16bit,
    "tensor_core": lambda r: r.tensor_core_used_pct,
    "step_ms": lambda r: r.step_ms_avg,
    "samples_per_s": lambda r: r.samples_per_s,
    "peak_memory_gib": lambda r: r.peak_memory_bytes / 2**30 if r.peak_memory_bytes else None,
}
MEMCPY_KINDS = {"memcpyhtod": "H2D", "memcpydtoh": "D2H", "memcpydtod": "D2D"}
HIGHER_IS_BETTER = {"utilization", "sixteen_bit", "tensor_core", "samples_per_s"}
