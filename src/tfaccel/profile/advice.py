"""Judging a profile against thresholds, and turning each finding into an action.

Thresholds: compute utilization above 75 %, memory copies under 5 % of device time,
kernel launch latency under 10 us (common rules of thumb for a healthy GPU step), and
XProf's own input-bound (5 % / 20 %) and launch-bound (3 % / 15 %) levels. Each action
names the `tfaccel.configure` option or code change, and the effect to expect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tfaccel.errors import InputError
from tfaccel.profile.report import HIGHER_IS_BETTER, METRIC_GETTERS, ProfileReport
from tfaccel.stats import noise_threshold


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str  # ok | warn | fail
    metric: str
    value: float | None
    threshold: str
    text: str
    action: str | None = None
    expected: str | None = None


def _level(value: float, warn: float, fail: float, higher_bad: bool = True) -> str:
    if higher_bad:
        return "fail" if value > fail else ("warn" if value > warn else "ok")
    return "fail" if value < fail else ("warn" if value < warn else "ok")


def _steps(report: ProfileReport) -> list[Finding]:
    out: list[Finding] = []
    if not report.steps:
        out.append(
            Finding(
                "steps",
                "warn",
                "steps",
                None,
                "step markers present",
                "no training steps were found in the trace, so there is no step-time breakdown",
                "profile through tfaccel (tfaccel profile -- "
                "python train.py, or ProfileCallback), which marks each step",
                None,
            )
        )
    return out


def _input(report: ProfileReport) -> list[Finding]:
    out: list[Finding] = []
    breakdown = report.breakdown_pct
    inp = breakdown.get("input")
    if inp is not None:
        lvl = _level(inp, 5, 20)
        out.append(
            Finding(
                "input",
                lvl,
                "input",
                inp,
                "5 % / 20 % of step time (XProf)",
                f"{inp:.1f}% of step time waits for input"
                + (
                    ""
                    if lvl == "ok"
                    else (": highly input-bound" if lvl == "fail" else ": moderately input-bound")
                ),
                None
                if lvl == "ok"
                else "report.dataset(ds) with tfaccel.configure(prefetch="
                "'device'); map(..., num_parallel_calls=tf.data.AUTOTUNE); cache_dataset=True "
                "if the data fits; move Python preprocessing into tf.data or onto the GPU; "
                "a script's numpy arrays given to fit: device_arrays=True under tfaccel run "
                "(copied to GPU memory once; tfaccel tune -- measures it)",
                None if lvl == "ok" else f"step time down by up to {inp:.0f}% (the input share)",
            )
        )
    return out


def _launch(report: ProfileReport) -> list[Finding]:
    out: list[Finding] = []
    breakdown = report.breakdown_pct
    launch = breakdown.get("kernel_launch")
    if launch is not None and (report.hardware != "CPU_ONLY"):
        lvl = _level(launch, 3, 15)
        out.append(
            Finding(
                "launch",
                lvl,
                "launch",
                launch,
                "3 % / 15 % of step time (XProf)",
                f"{launch:.1f}% of step time is spent launching kernels",
                None
                if lvl == "ok"
                else "tfaccel.configure(xla='jit') to fuse kernels, and "
                "steps_per_execution=10 or more to launch fewer, larger programs",
                None if lvl == "ok" else f"up to {launch:.0f}% off the step time",
            )
        )
    return out


def _utilization(report: ProfileReport) -> list[Finding]:
    out: list[Finding] = []
    inp, launch = report.breakdown_pct.get("input"), report.breakdown_pct.get("kernel_launch")
    if report.gpu_utilization_pct is not None:
        utilization = report.gpu_utilization_pct
        lvl = _level(utilization, 75, 50, higher_bad=False)
        cause = ""
        if lvl != "ok" and inp is not None and inp > 5:
            cause = " (the input pipeline is the first suspect: see 'input')"
        elif lvl != "ok" and report.memcpy_pct is not None and report.memcpy_pct > 10:
            cause = (
                f" (memory copies with no kernel beside them take {report.memcpy_pct:.0f}% of "
                "the step: see 'memcpy')"
            )
        elif lvl != "ok" and launch is not None and launch > 3:
            cause = " (kernel launches are the first suspect: see 'launch')"
        out.append(
            Finding(
                "utilization",
                lvl,
                "utilization",
                utilization,
                "above 75 %",
                f"the GPU computes {utilization:.0f}% of the time{cause}",
                None
                if lvl == "ok"
                else "a larger batch (tfaccel plan shows the largest that "
                "fits), XLA, steps_per_execution, and the input fixes above",
                None if lvl == "ok" else "throughput up in proportion to the idle time removed",
            )
        )
    return out


def _memcpy(report: ProfileReport) -> list[Finding]:
    out: list[Finding] = []
    if report.memcpy_pct is not None:
        lvl = _level(report.memcpy_pct, 5, 20)
        sizes = report.extra.get("memcpy_bytes", {})

        def part(kind: str, micros: float) -> str:
            gbs = sizes.get(kind, 0) / (micros * 1e3) if micros else 0.0
            return f"{kind} {micros / 1e3:.1f} ms" + (f" at {gbs:.1f} GB/s" if gbs else "")

        parts = ", ".join(
            part(copy_kind, micros)
            for copy_kind, micros in report.memcpy_us.items()
            if micros >= 50
        )
        overlapped = report.extra.get("memcpy_overlapped_pct")
        where = (
            "of step time with no kernel running" if overlapped is not None else "of device time"
        )
        text = f"memory copies take {report.memcpy_pct:.1f}% {where} ({parts or 'none'})"
        if overlapped is not None:
            text += f"; {overlapped:.0f}% of copy time overlaps compute"
        action = "keep tensors on the GPU (no .numpy() inside the step)"
        if report.memcpy_us.get("H2D", 0) > 0.5 * sum(report.memcpy_us.values()):  # input copies
            # Fewer bytes per copy pays; prefetch='device' made such a step slower (its
            # pageable copy overlapped nothing): the advice is input_cast.
            action = (
                "fewer bytes per batch: tfaccel.configure(input_cast='compute') with mixed "
                "precision sends float inputs in 16-bit (half the bytes); send images as "
                "uint8 and normalize on the GPU (4x fewer); then try "
                "tfaccel.configure(prefetch='device') and keep it only if it measures "
                "faster; " + action
            )
        out.append(
            Finding(
                "memcpy",
                lvl,
                "memcpy",
                report.memcpy_pct,
                "under 5 % of step time",
                text,
                None if lvl == "ok" else action,
                None if lvl == "ok" else f"up to {report.memcpy_pct:.0f}% of step time back",
            )
        )
    return out


def _launch_latency(report: ProfileReport) -> list[Finding]:
    out: list[Finding] = []
    if report.launch_latency_us_median is not None:
        latency = report.launch_latency_us_median
        lvl = _level(latency, 10, 50)
        out.append(
            Finding(
                "launch_latency",
                lvl,
                "launch_latency_us",
                latency,
                "under 10 us",
                f"median kernel launch call {latency:.1f} us "
                f"(p90 {report.launch_latency_us_p90:.1f} us) "
                f"over {report.kernel_launches} kernels"
                + (
                    f", {report.launches_per_step:.0f} per step" if report.launches_per_step else ""
                ),
                None
                if lvl == "ok"
                else "fewer, larger kernels: xla='jit' fuses them; larger "
                "batches amortise each launch",
                None if lvl == "ok" else "the launch queue stops starving the GPU",
            )
        )
    return out


def _small_kernels(report: ProfileReport) -> list[Finding]:
    out: list[Finding] = []
    if (
        report.kernel_avg_us is not None
        and report.kernel_avg_us < 10
        and (report.kernel_launches or 0) > 1000
    ):
        # Kernels XLA already fused: what is left is launching them one by one.
        compiled = bool(report.extra.get("xla_op_categories_pct"))
        out.append(
            Finding(
                "small_kernels",
                "warn",
                "kernel_avg_us",
                report.kernel_avg_us,
                "kernels over 10 us",
                f"{report.kernel_launches} kernels averaging {report.kernel_avg_us:.1f} us: "
                "many small "
                "kernels" + (", already fused by XLA" if compiled else ""),
                "tfaccel.configure(xla_options=['command_buffers']) launches XLA's loops "
                "as CUDA graphs; a larger batch does more work per kernel"
                if compiled
                else "tfaccel.configure(xla='jit') fuses them",
                "fewer launches, less time between kernels",
            )
        )
    return out


def _sixteen_bit(report: ProfileReport) -> list[Finding]:
    out: list[Finding] = []
    if report.pct_16bit is not None:
        # Under XLA the share comes from kernel names, and fusions do not name their
        # types: a lower bound. Any 16-bit GEMM or convolution there means mixed
        # precision is on.
        lower_bound = report.extra.get("pct_16bit_source") == "kernel names"
        lvl = "ok" if report.pct_16bit >= 50 or (lower_bound and report.pct_16bit >= 10) else "warn"
        text = f"{report.pct_16bit:.0f}% of device compute is in 16-bit"
        if lower_bound:
            text = (
                f"at least {report.pct_16bit:.0f}% of kernel time is in kernels that name a "
                "16-bit type (XLA's fusions do not name theirs)"
            )
        out.append(
            Finding(
                "sixteen_bit",
                lvl,
                "sixteen_bit",
                report.pct_16bit,
                "over 50 % of compute in 16-bit",
                text,
                None
                if lvl == "ok"
                else "tfaccel.configure(precision='auto') (bf16 on Ampere+, "
                "fp16 on Volta/Turing) with XLA",
                None
                if lvl == "ok"
                else "matmul and convolution time roughly halved on tensor cores",
            )
        )
    return out


def _tensor_cores(report: ProfileReport) -> list[Finding]:
    out: list[Finding] = []
    if report.tensor_core_eligible_pct is not None and report.tensor_core_used_pct is not None:
        gap = report.tensor_core_eligible_pct - report.tensor_core_used_pct
        lvl = "warn" if gap > 20 else "ok"
        out.append(
            Finding(
                "tensor_cores",
                lvl,
                "tensor_core",
                report.tensor_core_used_pct,
                "eligible kernel time that uses tensor cores",
                f"{report.tensor_core_used_pct:.0f}% of kernel time uses tensor cores; "
                f"{report.tensor_core_eligible_pct:.0f}% is eligible",
                None
                if lvl == "ok"
                else "mixed precision, and matrix dimensions (channels, "
                "hidden sizes, batch) that are multiples of 8",
                None,
            )
        )
    return out


def _xla_costs(report: ProfileReport) -> list[Finding]:
    out: list[Finding] = []
    # Costs read from the XLA ops, each with the setting that removes it.
    xla_costs = (
        (
            "expanded_matmul",
            "xla_expanded_matmul_pct",
            "{:.0f}% of XLA op time is matrix products that XLA turned into elementwise "
            "multiplies and reductions instead of GEMMs (vector x matrix, as in batch-1 "
            "decoding)",
            _gemv_action(),
            _SHARE_GAIN,
        ),
        (
            "casts",
            "xla_cast_to_16bit_pct",
            "{:.0f}% of XLA op time casts float32 to 16-bit: under a mixed policy each "
            "float32 weight is cast again at every use",
            "for inference and generation, tfaccel.configure(precision='bfloat16') stores "
            "the weights in bf16 (for training keep mixed_bfloat16)",
            _SHARE_GAIN,
        ),
        (
            "broadcast_grad",
            "xla_broadcast_grad_pct",
            "{:.0f}% of XLA op time computes weight gradients per batch element and then "
            "sums them: the gradient of a batched product whose weight is broadcast over "
            "the batch, as Keras' einsum runs EinsumDense projections (attention's query, "
            "key, value and output)",
            "tfaccel.configure(einsum='flat') computes each such gradient as one GEMM",
            _SHARE_GAIN,
        ),
    )
    for fid, metric, text, action, expected in xla_costs:
        expected = expected.format(report.extra.get(metric) or 0)
        value = report.extra.get(metric)
        if value is None:
            continue
        bad = value > 10
        out.append(
            Finding(
                fid,
                "warn" if bad else "ok",
                metric,
                value,
                "under 10 % of XLA op time",
                text.format(value),
                action if bad else None,
                expected if bad else None,
            )
        )
    return out


def _gemv_action() -> str:
    """The fix for XLA's expanded matrix products, with the TensorFlow it needs when the
    one installed here is older (its XLA has no pass for the option to turn off)."""
    from tfaccel import _compat
    from tfaccel.optimize.settings import XLA_OPTIONS

    action = "tfaccel.configure(xla_options=['gemv_as_gemm']) keeps them GEMMs"
    floor = _compat.xla_flags_floor(XLA_OPTIONS["gemv_as_gemm"])
    if floor is None:
        return action
    return f"{action} (it needs TensorFlow >= {floor}; this is {_compat.installed_version()})"


# What removing one of XLA's avoidable costs gains: at most its share (the docs'
# measurements page has figures of real models).
_SHARE_GAIN = (
    "up to {:.0f}% of XLA op time; `tfaccel profile diff BEFORE.json AFTER.json` "
    "measures the real gain"
)


def _compilation(report: ProfileReport) -> list[Finding]:
    out: list[Finding] = []
    breakdown = report.breakdown_pct
    comp = breakdown.get("compilation")
    if comp is not None and comp > 10:
        out.append(
            Finding(
                "compilation",
                "warn",
                "compilation",
                comp,
                "under 10 % of profiled steps",
                f"{comp:.0f}% of the profiled steps is compilation",
                "profile later steps (tfaccel profile --start 20); keep input shapes fixed so "
                "XLA does not recompile",
                "a profile of the steady state",
            )
        )
    return out


# The rules `advise` applies, in the order of its findings.
RULES = (
    _steps,
    _input,
    _launch,
    _utilization,
    _memcpy,
    _launch_latency,
    _small_kernels,
    _sixteen_bit,
    _tensor_cores,
    _xla_costs,
    _compilation,
)


def advise(report: ProfileReport) -> list[Finding]:
    """Every rule's findings for the profile `r` (RULES, in order)."""
    return [finding for rule in RULES for finding in rule(report)]


@dataclass(frozen=True)
class Gate:
    metric: str
    op: str  # ">=" (fail-under) or "<=" (fail-over)
    value: float
    actual: float | None
    passed: bool


def parse_gates(under: list[str], over: list[str]) -> list[tuple[str, str, float]]:
    """'utilization=75' -> (metric, op, value); unknown metrics are input errors."""
    out = []
    for relation, items in ((">=", under), ("<=", over)):
        for item in items:
            name, sep, val = item.partition("=")
            if not sep or name not in METRIC_GETTERS:
                raise InputError(
                    "Cannot read the gate",
                    expected="METRIC=VALUE with METRIC one of " + ", ".join(METRIC_GETTERS),
                    received=item,
                )
            try:
                number = float(val)
            except ValueError:
                number = math.nan
            if not math.isfinite(number):
                raise InputError(
                    "The gate's value is not a number", expected="METRIC=NUMBER", received=item
                )
            out.append((name, relation, number))
    return out


def check_gates(report: ProfileReport, gates: list[tuple[str, str, float]]) -> list[Gate]:
    results = []
    for name, relation, value in gates:
        actual = report.metric(name)
        passed = actual is not None and (actual >= value if relation == ">=" else actual <= value)
        results.append(Gate(name, relation, value, actual, passed))
    return results


@dataclass(frozen=True)
class DiffRow:
    metric: str
    a: float | None
    b: float | None
    change_pct: float | None
    better: bool | None
    threshold_pct: float | None = None  # a change within +- this is noise (better None)


# For step time and throughput the noise is the spread of the two runs' step times
# (stats.spread); for the shares and counts only the floor applies.
STEP_METRICS = {"step_ms", "samples_per_s"}


def diff(before: ProfileReport, after: ProfileReport) -> list[DiffRow]:
    """Every metric of both runs and its change; better or worse only beyond the noise
    (stats.noise_threshold, as tune decides), or a change from zero."""
    rows = []
    step_noise = 100.0 * noise_threshold(before.step_spread, after.step_spread)
    for name in METRIC_GETTERS:
        old, new = before.metric(name), after.metric(name)
        change = 100.0 * (new - old) / old if old and new is not None else None
        threshold = step_noise if name in STEP_METRICS else 100.0 * noise_threshold()
        beyond = (change is not None and abs(change) > threshold) or (
            old == 0 and new not in (None, 0)  # from zero: no ratio, but a change
        )
        better = None
        if beyond:
            better = (new > old) if name in HIGHER_IS_BETTER else (new < old)  # type: ignore[operator]
        rows.append(DiffRow(name, old, new, change, better, threshold))
    return rows
