"""Turning a captured run into numbers, through XProf's converters.

Every figure is None where the trace cannot give it (a CPU-only trace has no device
time; a trace without step markers has no step times) rather than a made-up zero.
"""

from __future__ import annotations

import itertools
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfaccel import stats
from tfaccel.profile.convert import convert, number, table_rows
from tfaccel.profile.load import ProfileRun, find_run
from tfaccel.workloads.flops import GEMM_OPS

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
        return stats.spread(s.total_ms for s in self.steps if s.total_ms > 0)

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


MEMCPY_EVENT = re.compile(r"^Memcpy(HtoD|H2D|DtoH|D2H|DtoD|D2D|PtoP|P2P)", re.IGNORECASE)
MEMCPY_EVENT_KIND = {"htod": "H2D", "h2d": "H2D", "dtoh": "D2H", "d2h": "D2H"}
MEMCPY_EVENT_KIND |= {"dtod": "D2D", "d2d": "D2D", "ptop": "P2P", "p2p": "P2P"}
SIZE = re.compile(r"size:(\d+)")


@dataclass
class TraceFacts:
    """What the device trace says directly (CUPTI activity, by correlation id)."""

    launch_call_us: list[float] = field(default_factory=list)  # host CUDA launch calls
    queue_delay_us: list[float] = field(default_factory=list)  # launch call -> start
    kernel_gaps_us: list[float] = field(default_factory=list)  # idle between kernels
    kernels: int = 0
    memcpy_us: dict[str, float] = field(default_factory=dict)
    memcpy_bytes: dict[str, int] = field(default_factory=dict)
    memcpy_exposed_us: float = 0.0  # copy time with no kernel running beside it
    kernel_busy_us: float = 0.0  # time at least one kernel ran
    window_us: float = 0.0  # the profiled steps (the trace's step markers)
    timeline: dict[str, Any] = field(default_factory=dict)  # one step, by stream


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _timeline(
    step_spans: list[tuple[float, float]],
    kernel_spans: dict[Any, list[tuple[float, float]]],
    copies: list[tuple[float, float]],
    thread_names: dict[Any, str],
    resolution_us: float = 5.0,
) -> dict[str, Any]:
    """What each GPU stream did during one full step (the second, or the first if only
    one), as busy intervals in ms from the step's start, merged below the resolution."""
    if not step_spans:
        return {}
    steps = sorted(step_spans)
    w0, w1 = steps[1] if len(steps) > 2 else steps[0]

    def rel(spans: list[tuple[float, float]]) -> list[list[float]]:
        merged: list[list[float]] = []
        for a, b in _clip(_union(spans), [(w0, w1)]):
            if merged and a - merged[-1][1] * 1000.0 - w0 < resolution_us:
                merged[-1][1] = round((b - w0) / 1000.0, 4)
            else:
                merged.append([round((a - w0) / 1000.0, 4), round((b - w0) / 1000.0, 4)])
        return merged

    rows = [
        {"name": thread_names.get(key, str(key)), "kind": "kernels", "spans": rel(spans)}
        for key, spans in sorted(kernel_spans.items(), key=lambda kv: str(kv[0]))
    ]
    rows.append({"name": "memory copies", "kind": "copies", "spans": rel(copies)})
    rows = [r for r in rows if r["spans"]]
    return {"step_ms": round((w1 - w0) / 1000.0, 3), "rows": rows} if rows else {}


def _clip(
    spans: list[tuple[float, float]], window: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """The parts of `spans` (disjoint, sorted) inside `window` (disjoint, sorted)."""
    out = []
    for a, b in spans:
        for w0, w1 in window:
            lo, hi = max(a, w0), min(b, w1)
            if lo < hi:
                out.append((lo, hi))
    return out


def _uncovered(spans: list[tuple[float, float]], cover: list[tuple[float, float]]) -> float:
    """Total length of `spans` (disjoint, sorted) outside `cover` (disjoint, sorted)."""
    total, j = 0.0, 0
    for a, b in spans:
        covered = 0.0
        while j < len(cover) and cover[j][1] <= a:
            j += 1
        k = j
        while k < len(cover) and cover[k][0] < b:
            covered += min(b, cover[k][1]) - max(a, cover[k][0])
            k += 1
        total += (b - a) - covered
    return total


def _trace_facts(trace: Any) -> TraceFacts:
    """Launch calls, queue delays, kernel and copy time from the trace viewer's events.

    A device event (a GPU stream) and the host-side CUDA API call that launched it share
    a correlation id; XProf names the host event after the kernel (or after
    cudaLaunchKernel in older versions), so the id, not the name, makes the match.
    Copies are the device's Memcpy* events, with their sizes from `memcpy_details`.
    """
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else []
    gpu_pids = {
        e.get("pid")
        for e in events
        if e.get("ph") == "M"
        and e.get("name") == "process_name"
        and "/device:GPU" in str(e.get("args", {}).get("name", ""))
    }
    host: dict[Any, float] = {}
    device: dict[Any, float] = {}
    facts = TraceFacts()
    kernel_spans: dict[Any, list[tuple[float, float]]] = {}  # by stream
    copy_spans: list[tuple[float, float]] = []
    thread_names = {
        (e.get("pid"), e.get("tid")): str(e.get("args", {}).get("name", ""))
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    step_spans = [
        (float(e.get("ts", 0)), float(e.get("ts", 0)) + float(e.get("dur") or 0))
        for e in events
        if e.get("ph") == "X"
        and e.get("pid") in gpu_pids
        and thread_names.get((e.get("pid"), e.get("tid"))) == "Steps"
    ]
    for e in events:
        args = e.get("args") or {}
        cid = args.get("correlation_id") or args.get("correlation id")
        if cid is None or e.get("ph") != "X":
            continue
        name = str(e.get("name", ""))
        copy = MEMCPY_EVENT.match(name)
        if e.get("pid") in gpu_pids:
            dur = float(e.get("dur") or 0.0)
            ts = float(e.get("ts", 0))
            if copy:
                copy_spans.append((ts, ts + dur))
                kind = MEMCPY_EVENT_KIND[copy.group(1).lower()]
                facts.memcpy_us[kind] = facts.memcpy_us.get(kind, 0.0) + dur
                size = SIZE.search(str(args.get("memcpy_details", "")))
                if size:
                    facts.memcpy_bytes[kind] = facts.memcpy_bytes.get(kind, 0) + int(size[1])
            elif not name.startswith("Memset"):
                device.setdefault(cid, ts)
                facts.kernels += 1
                kernel_spans.setdefault((e.get("pid"), e.get("tid")), []).append((ts, ts + dur))
        elif not copy and not name.startswith("Memset"):
            host.setdefault(cid, float(e.get("ts", 0)))
            facts.launch_call_us.append(float(e.get("dur") or 0.0))
    matched = host.keys() & device.keys()
    facts.queue_delay_us = [device[c] - host[c] for c in matched if device[c] >= host[c]]
    for spans in kernel_spans.values():
        spans.sort()
        facts.kernel_gaps_us += [b[0] - a[1] for a, b in itertools.pairwise(spans) if b[0] > a[1]]
    every_kernel = _union([x for spans in kernel_spans.values() for x in spans])
    copies = _union(copy_spans)
    # Shares are of the profiled steps' wall time: clip to the trace's step markers
    # (without markers, to the span of device activity).
    window = _union(step_spans)
    if not window and (every_kernel or copies):
        spans = every_kernel + copies
        window = [(min(a for a, _ in spans), max(b for _, b in spans))]
    facts.timeline = _timeline(step_spans, kernel_spans, copies, thread_names)
    every_kernel, copies = _clip(every_kernel, window), _clip(copies, window)
    facts.window_us = sum(b - a for a, b in window)
    facts.memcpy_exposed_us = _uncovered(copies, every_kernel)
    facts.kernel_busy_us = sum(b - a for a, b in every_kernel)
    return facts


# Kernels that run on tensor cores, by name: cuDNN/cuBLAS xmma and gmma kernels and
# CUTLASS tensor-op kernels name their types (bf16, f16, tf32, i8, e4m3); HMMA/IMMA,
# wgmma and the 884/1688/16816 tile shapes are tensor-core instructions. XProf's own
# flag misses cuDNN 9's xmma and CUTLASS implicit-GEMM kernels on Hopper.
# cuBLAS 12.8+ on Hopper names its GEMMs nvjet_sm90_... without their types; they are
# tensor-core (wgmma) kernels, and XProf's flag misses them too.
TC_NAME = re.compile(
    r"(xmma|gmma|cutlass|tensorop).*(bf16|f16|fp16|tf32|i8|e4m3|e5m2)"
    r"|hmma|imma|wgmma|h884|h1688|h16816|s1688|s16816|tensorop_[sh]|^nvjet_",
    re.IGNORECASE,
)
SIXTEEN_BIT_NAME = re.compile(r"bf16|f16|fp16|half|hmma|h884|h1688|h16816|e4m3|e5m2", re.I)


def uses_tensor_cores(kernel_name: str) -> bool:
    return bool(TC_NAME.search(kernel_name))


_DTYPE = re.compile(r"\b(bf16|f16|f8e4m3fn|f8e5m2|f32|f64|tf32)\[")


def _closing(text: str, start: int) -> int:
    """The index of the parenthesis that closes the one at `start` (len(text) if none)."""
    depth = 0
    for j in range(start, len(text)):
        depth += text[j] == "("
        depth -= text[j] == ")"
        if depth == 0:
            return j
    return len(text)


def hlo_operand_types(expression: str) -> list[str]:
    """The floating-point types of an HLO op's operands, from its text as XProf's
    hlo_stats shows it: `%name = RESULT op(OPERANDS), attributes`."""
    rhs = expression.split(" = ", 1)[-1]
    # A tuple result is in parentheses: the operands open after it.
    after_result = _closing(rhs, 0) + 1 if rhs.startswith("(") else 0
    start = rhs.find("(", after_result)
    if start < 0:
        return []
    return _DTYPE.findall(rhs[start + 1 : _closing(rhs, start)])


SIXTEEN_BIT_TYPES = ("bf16", "f16", "f8e4m3fn", "f8e5m2")
RESULT_TYPE = re.compile(r"=\s*\(?\s*([a-z][a-z0-9]*)\[")


# A BatchMatMulV2 gradient's sum over broadcast batch dimensions: "P/MatMul/Sum_1".
BROADCAST_SUM = re.compile(r"/MatMul/Sum(_1)?$")


def _tf_op_type(row: dict[str, Any]) -> str:
    """The TensorFlow op type an XLA op came from ("scope/MatMul:MatMul" -> MatMul)."""
    return str(row.get("tf_op_name") or "").rsplit(":", 1)[-1]


def _expanded_dot(row: dict[str, Any]) -> bool:
    """An XLA op of a TensorFlow matrix product that is not a GEMM: the multiply or the
    reduction that XLA's dot-strength-reduction pass makes of a small vector x matrix
    product (GEMMs are cuBLAS custom calls or gemm fusions)."""
    name = str(row.get("hlo_op_name") or "")
    return (
        _tf_op_type(row) in GEMM_OPS
        and str(row.get("category")) != "custom-call"
        and "gemm" not in name
        and ("reduce" in name or "multiply" in name)
    )


def _cast_to_16_bit(row: dict[str, Any]) -> bool:
    """A TensorFlow Cast that XLA runs as a float32 -> 16-bit conversion: under a mixed
    policy, what each float32 weight costs at every use."""
    expression = str(row.get("hlo_op_expression") or "")
    result = RESULT_TYPE.search(expression)
    return (
        _tf_op_type(row) == "Cast"
        and result is not None
        and result.group(1) in SIXTEEN_BIT_TYPES
        and "f32" in hlo_operand_types(expression)
    )


def _broadcast_grad_ops(rows: list[dict[str, Any]]) -> set[int]:
    """The rows (indices) of gradients of batched products with a broadcast operand:
    TensorFlow's BatchMatMulV2 gradient computes such an operand's gradient per batch
    element ("P/MatMul_1", or "P/MatMul" for the left one) and sums it over the batch
    ("P/Sum_1", "P/Sum"). Keras' einsum runs every EinsumDense projection this way
    (tfaccel.optimize.einsum). A product is counted only with its sum: batched products
    of equal batches (attention's) have none."""
    names = [str(r.get("tf_op_name") or "").rsplit(":", 1)[0] for r in rows]
    picked: set[int] = set()
    products: set[str] = set()
    for i, (name, row) in enumerate(zip(names, rows, strict=True)):
        m = BROADCAST_SUM.search(name)
        if m and _tf_op_type(row) == "Sum":
            picked.add(i)
            products.add(name[: m.start()] + "/MatMul/MatMul" + (m.group(1) or ""))
    picked.update(i for i, name in enumerate(names) if name in products)
    return picked


def xla_op_facts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """From XProf's hlo_stats rows (one per XLA op): the share of XLA op time whose
    operands are 16-bit floats (what XProf's own 16-bit figure misses under XLA: it
    counts TensorFlow ops, and XLA fuses them away), the time by op category, and the
    shares of two costs settings remove: matrix products XLA expanded into elementwise
    work instead of GEMMs, and float32 -> 16-bit casts."""
    total = sum(float(r.get("total_self_time") or 0) for r in rows)
    if not total:
        return {}
    by_category: dict[str, float] = {}
    sixteen = compute = expanded = casts = broadcast = 0.0
    broadcast_rows = _broadcast_grad_ops(rows)
    for i, r in enumerate(rows):
        t = float(r.get("total_self_time") or 0)
        cat = str(r.get("category") or "other")
        by_category[cat] = by_category.get(cat, 0.0) + t
        if cat.startswith("_"):  # _Recv / _Send: TensorFlow's copies in and out, not compute
            continue
        compute += t
        types = hlo_operand_types(str(r.get("hlo_op_expression") or ""))
        if any(x in SIXTEEN_BIT_TYPES for x in types):
            sixteen += t
        if i in broadcast_rows:
            broadcast += t
        if _expanded_dot(r):
            expanded += t
        elif _cast_to_16_bit(r):
            casts += t
    share = (lambda x: 100.0 * x / compute) if compute else (lambda x: 0.0)
    return {
        "xla_16bit_pct": share(sixteen),
        "xla_expanded_matmul_pct": share(expanded),
        "xla_cast_to_16bit_pct": share(casts),
        "xla_broadcast_grad_pct": share(broadcast),
        "xla_op_categories_pct": {
            k: 100.0 * v / total for k, v in sorted(by_category.items(), key=lambda kv: -kv[1])
        },
    }


def op_types(rows: list[dict[str, Any]], top: int = 10) -> tuple[TopItem, ...]:
    """Device self time by TensorFlow op type (MatMul, Sum, BiasAddGrad, ...), summed
    over every op of the type: a transformer's time is spread over hundreds of
    per-layer ops, none of which tops a per-op list."""
    total = sum(float(r.get("total_self_time") or 0) for r in rows) or 1.0
    acc: dict[str, list[float]] = {}
    for r in rows:
        kind = str(r.get("type") or "")
        a = acc.setdefault(kind, [0.0, 0.0, 0.0])
        a[0] += float(r.get("total_self_time") or 0)
        a[1] += int(r.get("occurrences") or 0)
        a[2] += 1
    return tuple(
        TopItem(kind, f"{int(n)} ops", t, int(c), 100.0 * t / total)
        for kind, (t, c, n) in sorted(acc.items(), key=lambda kv: -kv[1][0])[:top]
    )


def _breakdown(steps: list[StepBreakdown]) -> dict[str, float]:
    """Each category's share of the summed step time, in percent."""
    whole = sum(s.total_ms for s in steps if s.total_ms > 0)
    if not whole:
        return {}
    cats = list(CATEGORIES.values()) + sorted(
        {k for s in steps for k in s.parts_ms} - set(CATEGORIES.values())
    )
    return {c: 100.0 * sum(s.parts_ms.get(c, 0.0) for s in steps) / whole for c in cats}


def _move(step: StepBreakdown, src: str, dst: str, ms: float) -> None:
    """Book up to `ms` of a step's `src` time as `dst` instead."""
    moved = max(0.0, min(ms, step.parts_ms.get(src, 0.0)))
    step.parts_ms[src] = step.parts_ms.get(src, 0.0) - moved
    step.parts_ms[dst] = step.parts_ms.get(dst, 0.0) + moved


def _host_input_us(ip: list[Any]) -> float:
    """The host's tf.data time over the capture (XProf's input-pipeline breakdown)."""
    keys = (
        "preprocessing_us",
        "enqueue_us",
        "demanded_file_read_us",
        "advanced_file_read_us",
        "unclassified_nonequeue_us",
    )
    for table in ip if isinstance(ip, list) else []:
        props = table.get("p", {})
        if "preprocessing_us" in props:
            return sum(number(props.get(k)) or 0.0 for k in keys)
    return 0.0


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
    ov_props, conclusions = _overview(overview)
    hardware = str(ip_props.get("hardware_type") or ov_props.get("hardware_type") or "unknown")
    on_gpu = "GPU" in hardware.upper()
    totals = [s.total_ms for s in steps if s.total_ms > 0]
    avg = statistics.mean(totals) if totals else None
    std = statistics.pstdev(totals) if len(totals) > 1 else (0.0 if totals else None)
    breakdown = _breakdown(steps)
    # On a GPU, XProf books the wait for input as "All others": the step's idle time.
    # The host's tf.data time (XProf's input-pipeline table) says how much of that idle
    # time was input; each step waits for at most the smaller of the two.
    extra: dict[str, Any] = {}
    if on_gpu and steps and not breakdown.get("input"):
        host_input_us = _host_input_us(ip)
        if host_input_us:
            per_step_ms = host_input_us / 1000.0 / len(steps)
            for st in steps:
                _move(st, "idle_other", "input", per_step_ms)
            breakdown = _breakdown(steps)
            extra["host_input_ms_per_step"] = per_step_ms
    # Device busy share and 16-bit share, as XProf's overview computes them; where the
    # overview has no duty cycle, the share of step time the device computes.
    util = number(ov_props.get("device_duty_cycle_percent")) if on_gpu else None
    if util is None and on_gpu and breakdown:
        util = sum(
            breakdown.get(k, 0.0) for k in ("device_compute", "device_to_device", "collectives")
        )
    pct16 = number(ov_props.get("device_compute_16bit_percent")) if on_gpu else None
    rows_for_top, memcpy, memcpy_pct, top_ops = _op_table(ops)
    # Kernels and tensor cores.
    k = _kernel_table(kernels)
    ktotal, used, eligible = k.total_us, k.used_us, k.eligible_us
    k16, kcount = k.sixteen_bit_us, k.count
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
        top_kernels=k.top,
        top_ops=top_ops,
        peak_memory_bytes=peak,
        memory_capacity_bytes=capacity,
        memory_at_peak_by_op=tuple(sorted(at_peak.items(), key=lambda kv: -kv[1])[:8]),
        xprof_conclusions=tuple(dict.fromkeys(conclusions)),
        extra=extra,
        samples_per_step=pr.meta.get("samples_per_step"),
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
        ov_props.update({k: v for k, v in props.items() if k not in ov_props})
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
    items = (
        TopItem(
            str(r.get("operation")),
            str(r.get("type")),
            float(r.get("total_self_time") or 0),
            int(r.get("occurrences") or 0),
            100.0 * float(r.get("total_self_time") or 0) / total_self,
        )
        for r in rows_for_top
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


def _true(v: Any) -> bool:
    return v in (True, "true", "True")


def _tensor_cores(r: dict[str, Any]) -> str | None:
    """A kernel's tensor cores: "used", "eligible, not used" or None."""
    if _true(r.get("is_kernel_using_tensor_core")) or uses_tensor_cores(
        str(r.get("kernel_name") or "")
    ):
        return "used"
    return "eligible, not used" if _true(r.get("is_op_tensor_core_eligible")) else None


def _kernel_table(kernels: Any) -> _Kernels:
    rows = table_rows(kernels) if isinstance(kernels, dict) else []

    def us(r: dict[str, Any]) -> float:
        return float(r.get("total_duration_us") or 0)

    total = sum(us(r) for r in rows)
    tc = [(r, _tensor_cores(r)) for r in rows]
    top = (
        TopItem(
            str(r.get("kernel_name")),
            str(r.get("op_name") or ""),
            us(r),
            int(r.get("occurrences") or 0),
            100.0 * us(r) / total if total else None,
            cores,
        )
        for r, cores in tc
    )
    return _Kernels(
        total,
        sum(us(r) for r, cores in tc if cores == "used"),
        sum(us(r) for r, cores in tc if cores is not None),
        sum(us(r) for r in rows if SIXTEEN_BIT_NAME.search(str(r.get("kernel_name") or ""))),
        sum(int(r.get("occurrences") or 0) for r in rows),
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
    device_alloc = [k for k in per_alloc if re.match(r"gpu_\d+", k, re.IGNORECASE)]
    prof = per_alloc[device_alloc[0] if device_alloc else next(iter(per_alloc))]
    summary = prof.get("profileSummary", {})
    peak = int(number(summary.get("peakStats", {}).get("peakBytesInUse")) or 0) or None
    capacity = int(number(summary.get("memoryCapacity")) or 0) or None
    snaps = prof.get("memoryProfileSnapshots", [])
    for a in prof.get("activeAllocations", []):
        idx = int(a.get("snapshotIndex", -1))
        if 0 <= idx < len(snaps):
            meta = snaps[idx].get("activityMetadata", {})
            op = meta.get("tfOpName") or "(unknown op)"
            size = int(meta.get("allocationBytes") or 0) * int(a.get("numOccurrences") or 1)
            at_peak[op] = at_peak.get(op, 0) + size
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
        facts = _trace_facts(convert(files, "trace_viewer"))
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
        for st in steps:
            _move(st, "device_compute", "memcpy", dev.memcpy_pct / 100.0 * st.total_ms)
        dev.breakdown = _breakdown(steps)
