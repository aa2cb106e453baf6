"""Running a list of benchmarks with GPU telemetry, and the workload variants."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from tfaccel.bench.results import BenchReport
from tfaccel.bench.timer import Measurement
from tfaccel.environment import environment

Bench = tuple[str, Callable[[], Measurement | None]]


def _telemetry(sampler: Any, start: float) -> dict[str, Any]:
    from tfaccel.monitor.metrics import harmful

    snaps = sampler.history(since=start) if sampler is not None else []
    gpus = [g for s in snaps for g in s.gpus[:1] if not g.error]
    if not gpus:
        return {}
    reasons = sorted({r for g in gpus for r in harmful(g.throttle)})
    clocks = [g.sm_clock_mhz for g in gpus if g.sm_clock_mhz]
    temps = [g.temp_c for g in gpus if g.temp_c is not None]
    power = [g.power_w for g in gpus if g.power_w is not None]
    return {
        "sm_clock_mhz_min": min(clocks) if clocks else None,
        "sm_clock_mhz_max": max(clocks) if clocks else None,
        "temp_c_max": max(temps) if temps else None,
        "power_w_mean": sum(power) / len(power) if power else None,
        "throttled": bool(reasons),
        "throttle_reasons": reasons,
        "samples": len(gpus),
    }


def local_spec() -> Any:
    """The spec entry of GPU 0 (for percent of peak), or None."""
    try:
        from tfaccel.hardware.nvml import driver_info
        from tfaccel.hardware.specs import find_spec

        info = driver_info()
        return find_spec(info.gpus[0].name or "") if info.gpus else None
    except Exception:
        return None


def run_suite(
    suite: str,
    benches: list[Bench],
    on_progress: Callable[[str, Measurement | None], None] | None = None,
    sample: bool = True,
) -> BenchReport:
    """Run each benchmark, sampling GPU clocks/temperature/throttling while it runs.

    A benchmark that raises becomes a Measurement with `error`; the others go on.
    """
    sampler = None
    if sample:
        try:
            from tfaccel.monitor.sampler import Sampler

            sampler = Sampler([0], interval_s=0.5)
            sampler.start()
        except Exception:
            sampler = None
    started = time.perf_counter()
    out: list[Measurement] = []
    try:
        for name, fn in benches:
            if on_progress:
                on_progress(name, None)
            t0 = time.time()
            try:
                m = fn()
            except Exception as exc:
                m = Measurement(name, "", (), error=f"{type(exc).__name__}: {exc}"[:500])
            if m is None:
                continue
            m = replace(m, telemetry=_telemetry(sampler, t0))
            out.append(m)
            if on_progress:
                on_progress(name, m)
    finally:
        if sampler is not None:
            sampler.stop()
    return BenchReport(suite, environment(), tuple(out), time.perf_counter() - started)


MATMUL_VARIANTS = (
    ("float32", False, "fp32"),
    ("float32", True, "tf32"),
    ("float16", True, "fp16"),
    ("bfloat16", True, "bf16"),
)


def micro_benches(quick: bool = False) -> list[Bench]:
    from tfaccel.bench import micro

    spec = local_spec()
    shapes = ((1024, 1024, 1024),) if quick else micro.MATMUL_SHAPES
    size = 64 if quick else 2048
    repeats, number = (3, 3) if quick else (7, 10)
    benches: list[Bench] = []
    for shape in shapes:
        for dtype, tf32, peak_key in MATMUL_VARIANTS:
            peak = spec.peak(peak_key) if spec else None
            benches.append(
                (
                    f"matmul {dtype} tf32={tf32} {shape}",
                    partial(micro.matmul, dtype, shape, tf32, peak, repeats, number),
                )
            )
    benches.append(
        (
            "device bandwidth",
            partial(
                micro.device_bandwidth,
                size,
                spec.memory_bandwidth_gbs if spec else None,
                repeats,
                number,
            ),
        )
    )
    for direction in ("h2d", "d2h"):
        for pinned in (False, True):
            benches.append(
                (
                    f"{direction} pinned={pinned}",
                    partial(micro.host_transfer, direction, min(size, 512), pinned, repeats),
                )
            )
    for mode in ("eager", "function"):
        benches.append(
            (
                f"launch latency {mode}",
                partial(micro.launch_latency, mode, 200 if quick else 1000, repeats),
            )
        )
    benches.append(("all-reduce", partial(micro.allreduce, 64 if quick else 256)))
    return benches


def workload_benches(workload: str, batch: int, quick: bool = False) -> list[Bench]:
    """Training throughput in float32 and mixed precision, each with and without XLA."""
    from tfaccel.optimize.settings import Settings
    from tfaccel.tune.runner import StepPlan, run_trial

    steps = StepPlan(3, 2, 3) if quick else StepPlan(20, 5, 20)
    benches: list[Bench] = []
    for precision in ("float32", "auto"):
        for xla in ("off", "jit"):
            s = Settings(
                precision=precision,
                xla=xla,
                batch_size=batch,
                steps_per_execution=1 if quick else 10,
            )

            def run(s: Settings = s) -> Measurement:
                r = run_trial(workload, s, steps)
                label = f"{workload} train {r.precision or s.precision} xla={s.xla} batch={batch}"
                if not r.ok:
                    return Measurement(label, "samples/s", (), error=f"{r.status}: {r.error}")
                return Measurement(
                    label,
                    "samples/s",
                    r.windows,
                    warmup_s=r.compile_s,
                    params={**s.to_dict(), "peak_memory_bytes": r.peak_memory_bytes},
                )

            benches.append((f"{workload} {precision} xla={xla}", run))
    return benches
