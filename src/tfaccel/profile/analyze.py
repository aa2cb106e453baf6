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
from tfaccel.profile.hlo import SIXTEEN_BIT_NAME, op_types, uses_tensor_cores, xla_op_facts
from tfaccel.profile.load import ProfileRun, find_run
from tfaccel.profile.report import CATEGORIES, MEMCPY_KINDS, ProfileReport, StepBreakdown, TopItem
from tfaccel.profile.trace import trace_facts


def _steps(pipeline: list[Any]) -> tuple[list[StepBreakdown], dict[str, Any]]:
    for table in pipeline:
        ids = [column.get("id") for column in table.get("cols", [])]
        if "stepnum" in ids:
            steps = []
            for row in table_rows(table):
                parts = {
                    CATEGORIES[column_key]: float(row.get(column_key) or 0.0)
                    for column_key in CATEGORIES
                }
                total = float(row.get("stepTimeMs") or sum(parts.values()))
                steps.append(StepBreakdown(str(row.get("stepnum")), total, parts))
            return steps, table.get("p", {})
    return [], {}


def _breakdown(steps: list[StepBreakdown]) -> dict[str, float]:
    """Each category's share of the summed step time, in percent."""
    whole = sum(step.total_ms for step in steps if step.total_ms > 0)
    if not whole:
        return {}
    cats = list(CATEGORIES.values()) + sorted(
        {part for step in steps for part in step.parts_ms} - set(CATEGORIES.values())
    )
    return {
        category: 100.0 * sum(step.parts_ms.get(category, 0.0) for step in steps) / whole
        for category in cats
    }


def _move(step: StepBreakdown, src: str, dst: str, millis: float) -> None:
    """Book up to `ms` of a step's `src` time as `dst` instead."""
    moved = max(0.0, min(millis, step.parts_ms.get(src, 0.0)))
    step.parts_ms[src] = step.parts_ms.get(src, 0.0) - moved
    step.parts_ms[dst] = step.parts_ms.get(dst, 0.0) + moved


def _host_input_us(pipeline: list[Any]) -> float:
    """The host's tf.data time over the capture (XProf's input-pipeline breakdown)."""
    keys = (
        "preprocessing_us",
        "enqueue_us",
        "demanded_file_read_us",
        "advanced_file_read_us",
        "unclassified_nonequeue_us",
    )
    for table in pipeline if isinstance(pipeline, list) else []:
        props = table.get("p", {})
        if "preprocessing_us" in props:
            return sum(number(props.get(key)) or 0.0 for key in keys)
    return 0.0


def _percentile(values: list[float], quantile: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(quantile * (len(values) - 1) + 0.5))]


def analyze(logdir: str | Path, run: str | None = None, with_trace: bool = True) -> ProfileReport:
    """Analyse the newest run (or `run`) under `logdir`."""
    profile_run: ProfileRun = find_run(logdir, run)
    files = list(profile_run.files)
    overview = convert(files, "overview_page")
    pipeline = convert(files, "input_pipeline_analyzer")
    ops = convert(files, "framework_op_stats")
    kernels = convert(files, "kernel_stats")
    memory = convert(files, "memory_profile")
    steps, ip_props = _steps(pipeline)
    ov_props, conclusions = _overview(overview)
    hardware = str(ip_props.get("hardware_type") or ov_props.get("hardware_type") or "unknown")
    on_gpu = "GPU" in hardware.upper()
    totals = [step.total_ms for step in steps if step.total_ms > 0]
    avg = statistics.mean(totals) if totals else None
    std = statistics.pstdev(totals) if len(totals) > 1 else (0.0 if totals else None)
    breakdown = _breakdown(steps)
    # On a GPU, XProf books the wait for input as "All others": the step's idle time.
    # The host's tf.data time (XProf's input-pipeline table) says how much of that idle
    # time was input; each step waits for at most the smaller of the two.
    extra: dict[str, Any] = {}
    if on_gpu and steps and not breakdown.get("input"):
        host_input_us = _host_input_us(pipeline)
        if host_input_us:
            per_step_ms = host_input_us / 1000.0 / len(steps)
            for step_row in steps:
                _move(step_row, "idle_other", "input", per_step_ms)
            breakdown = _breakdown(steps)
            extra["host_input_ms_per_step"] = per_step_ms
    # Device busy share and 16-bit share, as XProf's overview computes them; where the
    # overview has no duty cycle, the share of step time the device computes.
    util = number(ov_props.get("device_duty_cycle_percent")) if on_gpu else None
    if util is None and on_gpu and breakdown:
        util = sum(
            breakdown.get(part, 0.0)
            for part in ("device_compute", "device_to_device", "collectives")
        )
    pct16 = number(ov_props.get("device_compute_16bit_percent")) if on_gpu else None
    rows_for_top, memcpy, memcpy_pct, top_ops = _op_table(ops)
    # Kernels and tensor cores.
    part = _kernel_table(kernels)
    ktotal, used, eligible = part.total_us, part.used_us, part.eligible_us
    k16, kcount = part.sixteen_bit_us, part.count
    if on_gpu and ktotal:
        # XProf counts 16-bit work by TensorFlow op; under XLA the ops it sees are
        # fusions, so it reports 0 %. The XLA ops' operand types say it (hlo_stats,
        # which needs the HLO of the run's programs); kernels that name a 16-bit type
        # are a lower bound where that is missing.
        extra["kernel_16bit_pct"] = 100.0 * k16 / ktotal
        xla = _xla_facts(files)
        extra.update(xla)
        if not pct16 and xla.get("xla_16bit_pct"):
            pct16 = xla["xla_16bit_pct"]
            extra["pct_16bit_source"] = "XLA op operand types"
        elif not pct16 and extra["kernel_16bit_pct"]:
            pct16 = extra["kernel_16bit_pct"]
            extra["pct_16bit_source"] = "kernel names"
    peak, capacity, at_peak = _memory(memory)
    dev = _Device(util, memcpy, memcpy_pct, breakdown)
    if with_trace and on_gpu:
        duty_known = ov_props.get("device_duty_cycle_percent") is not None
        _with_trace(dev, files, steps, extra, duty_known)
    util, memcpy, memcpy_pct, breakdown = dev.util, dev.memcpy, dev.memcpy_pct, dev.breakdown
    gaps, launches = dev.gaps, dev.launches
    if launches is None and kcount:
        launches = kcount
    return ProfileReport(
        logdir=str(logdir),
        run=profile_run.name,
        note=profile_run.note,
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
        top_kernels=part.top,
        top_ops=top_ops,
        peak_memory_bytes=peak,
        memory_capacity_bytes=capacity,
        memory_at_peak_by_op=tuple(sorted(at_peak.items(), key=lambda kv: -kv[1])[:8]),
        xprof_conclusions=tuple(dict.fromkeys(conclusions)),
        extra=extra,
        samples_per_step=profile_run.meta.get("samples_per_step"),
        top_op_types=op_types(rows_for_top),
    )


def _xla_facts(files: list[Path]) -> dict[str, Any]:
    """xla_op_facts of XProf's hlo_stats, or {} where the run has no XLA programs or
    the capture kept no HLO (trimmed traces)."""
    try:
        stats = convert(files, "hlo_stats")
    except Exception:
        return {}
    table = stats if isinstance(stats, dict) else (stats[0] if stats else {})
    try:
        return xla_op_facts(table_rows(table))
    except (TypeError, ValueError, KeyError):
        return {}


def _overview(overview: Any) -> tuple[dict[str, Any], list[str]]:
    """XProf's overview page: its properties (the first of each) and its conclusions."""
    ov_props: dict[str, Any] = {}
    conclusions: list[str] = []
    for table in overview if isinstance(overview, list) else []:
        props = table.get("p", {})
        ov_props.update({prop: value for prop, value in props.items() if prop not in ov_props})
        for key in ("statement", "input_conclusion", "remark_text"):
            if props.get(key):
                conclusions.append(str(props[key]))
    return ov_props, conclusions


def _op_table(
    ops: Any,
) -> tuple[list[dict[str, Any]], dict[str, float], float | None, tuple[TopItem, ...]]:
    """The framework op table's device rows: (rows for the top list, memory copy time
    by kind, copies' share of device time, the top 10 ops). framework_op_stats holds the
    same table with and without IDLE: the first is read."""
    op_rows = table_rows(ops[0] if isinstance(ops, list) and ops else ops or {})
    device_rows = [row for row in op_rows if str(row.get("host_or_device", "")).lower() == "device"]
    rows_for_top = [row for row in (device_rows or op_rows) if str(row.get("type")) != "IDLE"]
    device_total = sum(float(row.get("total_self_time") or 0) for row in device_rows)
    memcpy: dict[str, float] = {}
    for row in device_rows:
        # XProf's op types: MemcpyHToD, MemcpyDToH, MemcpyDToD (and MemcpyHToH, host-only).
        kind = MEMCPY_KINDS.get(str(row.get("type", "")).lower())
        if kind is not None:
            memcpy[kind] = memcpy.get(kind, 0.0) + float(row.get("total_self_time") or 0)
    memcpy_pct = 100.0 * sum(memcpy.values()) / device_total if device_total else None
    total_self = sum(float(row.get("total_self_time") or 0) for row in rows_for_top) or 1.0
    items = (
        TopItem(
            str(row.get("operation")),
            str(row.get("type")),
            float(row.get("total_self_time") or 0),
            int(row.get("occurrences") or 0),
            100.0 * float(row.get("total_self_time") or 0) / total_self,
        )
        for row in rows_for_top
    )
    return rows_for_top, memcpy, memcpy_pct, tuple(sorted(items, key=lambda x: -x.total_us)[:10])


@dataclass(frozen=True)
class _Kernels:
    """The kernel table, summed: time in all, with tensor cores, eligible for them and
    in kernels that name a 16-bit type; launches; the top 10 kernels."""

    total_us: float
    used_us: float
    eligible_us: float
    sixteen_bit_us: float
    count: int
    top: tuple[TopItem, ...]


def _true(value: Any) -> bool:
    return value in (True, "true", "True")


def _tensor_cores(row: dict[str, Any]) -> str | None:
    """A kernel's tensor cores: "used", "eligible, not used" or None."""
    if _true(row.get("is_kernel_using_tensor_core")) or uses_tensor_cores(
        str(row.get("kernel_name") or "")
    ):
        return "used"
    return "eligible, not used" if _true(row.get("is_op_tensor_core_eligible")) else None


def _kernel_table(kernels: Any) -> _Kernels:
    rows = table_rows(kernels) if isinstance(kernels, dict) else []

    def us(row: dict[str, Any]) -> float:
        return float(row.get("total_duration_us") or 0)

    total = sum(us(row) for row in rows)
    with_cores = [(row, _tensor_cores(row)) for row in rows]
    top = (
        TopItem(
            str(row.get("kernel_name")),
            str(row.get("op_name") or ""),
            us(row),
            int(row.get("occurrences") or 0),
            100.0 * us(row) / total if total else None,
            cores,
        )
        for row, cores in with_cores
    )
    return _Kernels(
        total,
        sum(us(row) for row, cores in with_cores if cores == "used"),
        sum(us(row) for row, cores in with_cores if cores is not None),
        sum(us(row) for row in rows if SIXTEEN_BIT_NAME.search(str(row.get("kernel_name") or ""))),
        sum(int(row.get("occurrences") or 0) for row in rows),
        tuple(sorted(top, key=lambda x: -x.total_us)[:10]),
    )


def _memory(memory: Any) -> tuple[int | None, int | None, dict[str, int]]:
    """The device allocator's peak and capacity, and what was allocated at the peak, by
    op (the device's allocator, GPU_0_bfc, not the pinned host one)."""
    peak = capacity = None
    at_peak: dict[str, int] = {}
    per_alloc = memory.get("memoryProfilePerAllocator", {}) if isinstance(memory, dict) else {}
    if not per_alloc:
        return peak, capacity, at_peak
    device_alloc = [
        allocator for allocator in per_alloc if re.match(r"gpu_\d+", allocator, re.IGNORECASE)
    ]
    prof = per_alloc[device_alloc[0] if device_alloc else next(iter(per_alloc))]
    summary = prof.get("profileSummary", {})
    peak = int(number(summary.get("peakStats", {}).get("peakBytesInUse")) or 0) or None
    capacity = int(number(summary.get("memoryCapacity")) or 0) or None
    snaps = prof.get("memoryProfileSnapshots", [])
    for allocation in prof.get("activeAllocations", []):
        idx = int(allocation.get("snapshotIndex", -1))
        if 0 <= idx < len(snaps):
            meta = snaps[idx].get("activityMetadata", {})
            op_name = meta.get("tfOpName") or "(unknown op)"
            size = int(meta.get("allocationBytes") or 0) * int(
                allocation.get("numOccurrences") or 1
            )
            at_peak[op_name] = at_peak.get(op_name, 0) + size
    return peak, capacity, at_peak


@dataclass
class _Device:
    """The device figures that the trace, where it can be read, refines."""

    util: float | None
    memcpy: dict[str, float]
    memcpy_pct: float | None
    breakdown: dict[str, float]
    gaps: list[float] = field(default_factory=list)
    launches: int | None = None


def _with_trace(
    dev: _Device,
    files: list[Any],
    steps: list[StepBreakdown],
    extra: dict[str, Any],
    duty_known: bool,
) -> None:
    """What the trace adds: launch latency (what one CUDA launch call costs the host;
    how far the host runs ahead of the GPU and the GPU's idle gaps between kernels kept
    beside it), compute utilization where the overview has no duty cycle, and the
    memory copies no kernel ran beside."""
    try:
        facts = trace_facts(convert(files, "trace_viewer"))
    except Exception:
        return
    if facts is None:
        return
    dev.gaps, dev.launches = facts.launch_call_us, facts.kernels or None
    if facts.queue_delay_us:
        extra["queue_delay_us_median"] = statistics.median(facts.queue_delay_us)
    if facts.kernel_gaps_us:
        extra["kernel_gap_us_median"] = statistics.median(facts.kernel_gaps_us)
    if facts.timeline:
        extra["timeline"] = facts.timeline
    if facts.window_us and not duty_known:
        # The share of step time some kernel ran. XProf's "device compute" also counts
        # copies that run with no kernel beside.
        dev.util = 100.0 * facts.kernel_busy_us / facts.window_us
    if not facts.memcpy_us:
        return
    # Copies from the device trace (op tables miss the input's copies, which TensorFlow
    # books under _Recv). The share counts only the copy time no kernel ran beside: a
    # copy that overlaps compute costs nothing.
    dev.memcpy = dict(facts.memcpy_us)
    extra["memcpy_bytes"] = dict(facts.memcpy_bytes)
    exposed = facts.memcpy_exposed_us
    extra["memcpy_overlapped_pct"] = 100.0 * (1 - exposed / max(sum(dev.memcpy.values()), 1e-9))
    if facts.window_us:
        dev.memcpy_pct = 100.0 * exposed / facts.window_us
        # XProf counts those copies as device compute; show them apart.
        for step in steps:
            _move(step, "device_compute", "memcpy", dev.memcpy_pct / 100.0 * step.total_ms)
        dev.breakdown = _breakdown(steps)
