"""Turning a captured run into numbers, through XProf's converters.

Every figure is None where the trace cannot give it (a CPU-only trace has no device
time; a trace without step markers has no step times) rather than a made-up zero.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfaccel.profile.convert import convert, number, table_rows
from tfaccel.profile.load import ProfileRun, find_run

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
    "peak_memory_gib": lambda r: r.peak_memory_bytes / 2**30 if r.peak_memory_bytes else None,
}
MEMCPY_KINDS = {"memcpyhtod": "H2D", "memcpydtoh": "D2H", "memcpydtod": "D2D"}
HIGHER_IS_BETTER = {"utilization", "sixteen_bit", "tensor_core"}


def _steps(ip: list[Any]) -> tuple[list[StepBreakdown], dict[str, Any]]:
    for table in ip:
        ids = [c.get("id") for c in table.get("cols", [])]
        if "stepnum" in ids:
            steps = []
            for row in table_rows(table):
                parts = {CATEGORIES[k]: float(row.get(k) or 0.0) for k in CATEGORIES}
                total = float(row.get("stepTimeMs") or sum(parts.values()))
                steps.append(StepBreakdown(str(row.get("stepnum")), total, parts))
            return steps, table.get("p", {})
    return [], {}


def _trace_launches(trace: Any) -> tuple[list[float], int]:
    """Launch-to-start gaps (us) from the trace: host cudaLaunchKernel events matched to
    device kernel events by correlation id."""
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else []
    host: dict[Any, float] = {}
    device: dict[Any, float] = {}
    launch = re.compile(r"(cu|cuda)LaunchKernel|cudaGraphLaunch", re.IGNORECASE)
    gpu_pids = {
        e.get("pid")
        for e in events
        if e.get("ph") == "M"
        and e.get("name") == "process_name"
        and "/device:GPU" in str(e.get("args", {}).get("name", ""))
    }
    for e in events:
        args = e.get("args") or {}
        cid = args.get("correlation_id") or args.get("correlation id")
        if cid is None or e.get("ph") != "X":
            continue
        if e.get("pid") in gpu_pids:
            device.setdefault(cid, float(e.get("ts", 0)))
        elif launch.search(str(e.get("name", ""))):
            host.setdefault(cid, float(e.get("ts", 0)))
    gaps = [device[c] - host[c] for c in host.keys() & device.keys() if device[c] >= host[c]]
    return gaps, len(device)


def _percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def analyze(logdir: str | Path, run: str | None = None, with_trace: bool = True) -> ProfileReport:
    """Analyse the newest run (or `run`) under `logdir`."""
    pr: ProfileRun = find_run(logdir, run)
    files = list(pr.files)
    overview = convert(files, "overview_page")
    ip = convert(files, "input_pipeline_analyzer")
    ops = convert(files, "framework_op_stats")
    kernels = convert(files, "kernel_stats")
    memory = convert(files, "memory_profile")
    steps, ip_props = _steps(ip)
    ov_props: dict[str, Any] = {}
    conclusions: list[str] = []
    for table in overview if isinstance(overview, list) else []:
        props = table.get("p", {})
        ov_props.update({k: v for k, v in props.items() if k not in ov_props})
        for key in ("statement", "input_conclusion", "remark_text"):
            if props.get(key):
                conclusions.append(str(props[key]))
    hardware = str(ip_props.get("hardware_type") or ov_props.get("hardware_type") or "unknown")
    on_gpu = "GPU" in hardware.upper()
    totals = [s.total_ms for s in steps if s.total_ms > 0]
    avg = statistics.mean(totals) if totals else None
    std = statistics.pstdev(totals) if len(totals) > 1 else (0.0 if totals else None)
    breakdown: dict[str, float] = {}
    if totals:
        whole = sum(totals)
        for cat in CATEGORIES.values():
            breakdown[cat] = 100.0 * sum(s.parts_ms.get(cat, 0.0) for s in steps) / whole
    # Device busy share and 16-bit share, as XProf's overview computes them.
    util = number(ov_props.get("device_duty_cycle_percent")) if on_gpu else None
    pct16 = number(ov_props.get("device_compute_16bit_percent")) if on_gpu else None
    # Memory copies, from the framework op table's device rows.
    # framework_op_stats holds the same table with and without IDLE: read the first.
    op_rows = table_rows(ops[0] if isinstance(ops, list) and ops else ops or {})
    device_rows = [r for r in op_rows if str(r.get("host_or_device", "")).lower() == "device"]
    rows_for_top = [r for r in (device_rows or op_rows) if str(r.get("type")) != "IDLE"]
    device_total = sum(float(r.get("total_self_time") or 0) for r in device_rows)
    memcpy: dict[str, float] = {}
    for r in device_rows:
        # XProf's op types: MemcpyHToD, MemcpyDToH, MemcpyDToD (and MemcpyHToH, host-only).
        kind = MEMCPY_KINDS.get(str(r.get("type", "")).lower())
        if kind is not None:
            memcpy[kind] = memcpy.get(kind, 0.0) + float(r.get("total_self_time") or 0)
    memcpy_pct = 100.0 * sum(memcpy.values()) / device_total if device_total else None
    total_self = sum(float(r.get("total_self_time") or 0) for r in rows_for_top) or 1.0
    top_ops = tuple(
        sorted(
            (
                TopItem(
                    str(r.get("operation")),
                    str(r.get("type")),
                    float(r.get("total_self_time") or 0),
                    int(r.get("occurrences") or 0),
                    100.0 * float(r.get("total_self_time") or 0) / total_self,
                )
                for r in rows_for_top
            ),
            key=lambda x: -x.total_us,
        )[:10]
    )
    # Kernels and tensor cores.
    krows = table_rows(kernels) if isinstance(kernels, dict) else []
    ktotal = sum(float(r.get("total_duration_us") or 0) for r in krows)
    eligible = sum(
        float(r.get("total_duration_us") or 0)
        for r in krows
        if r.get("is_op_tensor_core_eligible") in (True, "true", "True")
    )
    used = sum(
        float(r.get("total_duration_us") or 0)
        for r in krows
        if r.get("is_kernel_using_tensor_core") in (True, "true", "True")
    )
    kcount = sum(int(r.get("occurrences") or 0) for r in krows)

    def tc(r: dict[str, Any]) -> str | None:
        if r.get("is_kernel_using_tensor_core") in (True, "true", "True"):
            return "used"
        if r.get("is_op_tensor_core_eligible") in (True, "true", "True"):
            return "eligible, not used"
        return None

    top_kernels = tuple(
        sorted(
            (
                TopItem(
                    str(r.get("kernel_name")),
                    str(r.get("op_name") or ""),
                    float(r.get("total_duration_us") or 0),
                    int(r.get("occurrences") or 0),
                    100.0 * float(r.get("total_duration_us") or 0) / ktotal if ktotal else None,
                    tc(r),
                )
                for r in krows
            ),
            key=lambda x: -x.total_us,
        )[:10]
    )
    # Memory: the device allocator's peak, and what was allocated at the peak, by op.
    peak = capacity = None
    at_peak: dict[str, int] = {}
    per_alloc = memory.get("memoryProfilePerAllocator", {}) if isinstance(memory, dict) else {}
    if per_alloc:
        name = next((k for k in per_alloc if "gpu" in k.lower()), next(iter(per_alloc)))
        prof = per_alloc[name]
        summary = prof.get("profileSummary", {})
        peak = int(number(summary.get("peakStats", {}).get("peakBytesInUse")) or 0) or None
        capacity = int(number(summary.get("memoryCapacity")) or 0) or None
        snaps = prof.get("memoryProfileSnapshots", [])
        for a in prof.get("activeAllocations", []):
            idx = int(a.get("snapshotIndex", -1))
            if 0 <= idx < len(snaps):
                meta = snaps[idx].get("activityMetadata", {})
                op = meta.get("tfOpName") or "(unknown op)"
                at_peak[op] = at_peak.get(op, 0) + int(meta.get("allocationBytes") or 0) * int(
                    a.get("numOccurrences") or 1
                )
    gaps: list[float] = []
    launches = None
    if with_trace and on_gpu:
        try:
            gaps, launches = _trace_launches(convert(files, "trace_viewer"))
        except Exception:
            gaps, launches = [], None
    if launches is None and kcount:
        launches = kcount
    return ProfileReport(
        logdir=str(logdir),
        run=pr.name,
        note=pr.note,
        hardware=hardware,
        steps=tuple(steps),
        step_ms_avg=avg,
        step_ms_std=std,
        breakdown_pct=breakdown,
        gpu_utilization_pct=util,
        memcpy_pct=memcpy_pct,
        memcpy_us=memcpy,
        launch_latency_us_median=statistics.median(gaps) if gaps else None,
        launch_latency_us_p90=_percentile(gaps, 0.9) if gaps else None,
        kernel_launches=launches,
        launches_per_step=launches / len(steps) if launches and steps else None,
        pct_16bit=pct16,
        tensor_core_eligible_pct=100.0 * eligible / ktotal if ktotal else None,
        tensor_core_used_pct=100.0 * used / ktotal if ktotal else None,
        kernel_avg_us=ktotal / kcount if kcount else None,
        top_kernels=top_kernels,
        top_ops=top_ops,
        peak_memory_bytes=peak,
        memory_capacity_bytes=capacity,
        memory_at_peak_by_op=tuple(sorted(at_peak.items(), key=lambda kv: -kv[1])[:8]),
        xprof_conclusions=tuple(dict.fromkeys(conclusions)),
    )
