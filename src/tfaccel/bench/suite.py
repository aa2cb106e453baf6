"""Running a list of benchmarks with GPU telemetry, and the workload variants."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from tfaccel.bench.results import BenchReport
from tfaccel.bench.timer import Measurement, Skipped, start_gpu_sampler
from tfaccel.environment import environment
from tfaccel.errors import InputError

Bench = tuple[str, Callable[[], Measurement | list[Measurement] | Skipped | None]]


def _telemetry(sampler: Any, start: float) -> dict[str, Any]:
    from tfaccel.monitor.metrics import harmful

    snaps = sampler.history(since=start) if sampler is not None else []
    gpus = [gpu for snap in snaps for gpu in snap.gpus[:1] if not gpu.error]
    if not gpus:
        return {}
    reasons = sorted({reason for gpu in gpus for reason in harmful(gpu.throttle)})
    clocks = [gpu.sm_clock_mhz for gpu in gpus if gpu.sm_clock_mhz]
    temps = [gpu.temp_c for gpu in gpus if gpu.temp_c is not None]
    power = [gpu.power_w for gpu in gpus if gpu.power_w is not None]
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


def share_gpu_memory() -> None:
    """Let this process take GPU memory as it needs it, instead of all of it at once, so
    that child processes (training trials, another framework) get memory of their own."""
    from tfaccel._tf import import_tensorflow

    tf = import_tensorflow()
    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:  # TensorFlow already started its GPUs (tests): keep them
            return


def run_suite(
    suite: str,
    benches: list[Bench],
    on_progress: Callable[[str, Measurement | None], None] | None = None,
    sample: bool = True,
    on_partial: Callable[[BenchReport], None] | None = None,
) -> BenchReport:
    """Run each benchmark, sampling GPU clocks/temperature/throttling while it runs.

    A benchmark that raises becomes a Measurement with `error`; the others go on.
    `on_partial` gets the report so far (complete=False) after each benchmark, so that
    an interrupted suite keeps what finished.
    """
    sampler = start_gpu_sampler(0.5) if sample else None
    started = time.perf_counter()
    env = environment()
    out: list[Measurement] = []
    skipped: list[tuple[str, str]] = []
    try:
        for name, bench in benches:
            if on_progress:
                on_progress(name, None)
            began = time.time()
            try:
                got = bench()
            except Exception as exc:
                got = Measurement(name, "", (), error=f"{type(exc).__name__}: {exc}"[:500])
            if isinstance(got, Skipped) or got is None:
                skipped.append((name, got.why if got else "does not apply here"))
                got = []
            results = got if isinstance(got, list) else [got]
            telemetry = _telemetry(sampler, began)
            done = [replace(measurement, telemetry=telemetry) for measurement in results]
            out += done
            if on_partial:
                on_partial(
                    BenchReport(
                        suite, env, tuple(out), time.perf_counter() - started, False, tuple(skipped)
                    )
                )
            if on_progress:
                on_progress(name, done[0] if done else None)
    finally:
        if sampler is not None:
            sampler.stop()
    return BenchReport(
        suite, env, tuple(out), time.perf_counter() - started, skipped=tuple(skipped)
    )


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


# The spec file's peak for the precision a trial ran in (TF32 is on unless float32).
PEAK_KEY = {
    "float32": "fp32",
    "tf32": "tf32",
    "mixed_bfloat16": "bf16",
    "bfloat16": "bf16",
    "mixed_float16": "fp16",
}


def model_tflops(
    forward_flops: int | None, samples_per_s: float | None, peak_key: str | None, spec: Any
) -> dict[str, float]:
    """Training TFLOP/s of the model's products (3 x forward FLOPs per sample, see
    tfaccel.workloads.flops) and their share of the GPU's peak in that precision."""
    if not forward_flops or not samples_per_s:
        return {}
    tflops = 3 * forward_flops * samples_per_s / 1e12
    out = {"forward_gflops_per_sample": forward_flops / 1e9, "model_tflops": tflops}
    peak = spec.peak(peak_key) if spec is not None and peak_key else None
    if peak:
        out["model_tflops_pct_of_peak"] = 100.0 * tflops / peak
    return out


def workload_benches(workload: str, batch: int, quick: bool = False) -> list[Bench]:
    """Training throughput in float32 and mixed precision, each with and without XLA."""
    from tfaccel.optimize.settings import Settings
    from tfaccel.trial.runner import StepPlan, run_trial

    steps = StepPlan(3, 2, 3) if quick else StepPlan(20, 5, 20)
    spec = local_spec()
    benches: list[Bench] = []
    for precision in ("float32", "auto"):
        for xla in ("off", "jit"):
            settings = Settings(
                precision=precision,
                xla=xla,
                batch_size=batch,
                steps_per_execution=1 if quick else 10,
            )

            def run(settings: Settings = settings) -> Measurement:
                trial = run_trial(workload, settings, steps, extra={"count_flops": True})
                prec = trial.precision or settings.precision
                if settings.precision == "auto" and prec == "float32":  # no 16-bit math here
                    prec = "auto=float32"
                label = f"{workload} train {prec} xla={settings.xla} batch={batch}"
                if not trial.ok:
                    return Measurement(
                        label, "samples/s", (), error=f"{trial.status}: {trial.error}"
                    )
                params = {**settings.to_dict(), "peak_memory_bytes": trial.peak_memory_bytes}
                params.update(
                    model_tflops(
                        trial.extra.get("forward_flops_per_sample"),
                        trial.samples_per_s,
                        PEAK_KEY.get(trial.precision or ""),
                        spec,
                    )
                )
                return Measurement(
                    label, "samples/s", trial.windows, warmup_s=trial.compile_s, params=params
                )

            benches.append((f"{workload} {precision} xla={xla}", run))
    return benches


# The A/B every inference benchmark runs: float32 against mixed precision.
PAIR = ("float32", "mixed_bfloat16")


def _yolo_benches(quick: bool, spec: Any) -> list[Bench]:
    from tfaccel.bench import inference
    from tfaccel.workloads.models import yolo_style

    image_size = (128, 224) if quick else None
    build = partial(yolo_style, image_size) if image_size else yolo_style
    # Does XLA help? Without it at batch 1 beside each run with it.
    runs = [(batch, precision, True) for batch in ((1,) if quick else (1, 8)) for precision in PAIR]
    runs += [(1, precision, False) for precision in PAIR]
    return [
        (
            f"yolo batch={batch} {precision} xla={'on' if x else 'off'}",
            partial(
                inference.forward_throughput,
                "yolo-style 4K",
                build,
                batch,
                precision,
                x,
                3 if quick else 5,
                2 if quick else 10,
            ),
        )
        for batch, precision, x in runs
    ]


def _conv3d_benches(quick: bool, spec: Any) -> list[Bench]:
    from tfaccel.bench import inference

    runs3d = [("mixed_bfloat16", True), ("float32", True), ("mixed_bfloat16", False)]
    size = (1, (8, 16, 16), 8) if quick else (4, (64, 128, 128), 64)
    return [
        (
            f"conv3d {precision} xla={'on' if x else 'off'}",
            partial(
                inference.conv3d,
                size[0],
                size[1],
                size[2],
                precision,
                0.5 if quick else 8.0,
                spec.peak("bf16" if precision != "float32" else "tf32") if spec else None,
                x,
            ),
        )
        for precision, x in runs3d
    ]


def _gpt2_benches(quick: bool, spec: Any) -> list[Bench]:
    from tfaccel.bench import inference

    shape: dict[str, Any] = {"layers": 1, "hidden": 32, "heads": 2, "vocab": 500} if quick else {}
    # bfloat16: the weights in bf16 too, as models are served (the mixed policy
    # casts each float32 weight again for every token). Without XLA: batch 1.
    precisions = ("float32", "bfloat16") if quick else ("float32", *PAIR[1:], "bfloat16")
    batches = (1,) if quick else (1, 16)
    gen = [(batch, precision, True, "keras_hub") for batch in batches for precision in precisions]
    gen += [(1, precision, False, "keras_hub") for precision in (("float32",) if quick else PAIR)]
    # The same greedy decoding with a cache per layer (bench.inference.greedy_decoder),
    # and with tfaccel's fused decoding step (one QKV product, one-pass layer norms),
    # in its own greedy loop and in KerasHub's generate (fuse_generation)
    loops = ("tfaccel", "fused", "fused_generate")
    gen += [(batch, "bfloat16", True, loop) for batch in batches for loop in loops]
    return [
        (
            f"gpt2 batch={batch} {precision} xla={'on' if x else 'off'} loop={loop}",
            partial(
                inference.gpt2_generation,
                batch,
                8 if quick else 32,
                8 if quick else 128,
                precision=precision,
                repeats=2 if quick else 3,
                xla=x,
                loop=loop,
                **shape,
            ),
        )
        for batch, precision, x, loop in gen
    ]


def _remat_benches(quick: bool, spec: Any) -> list[Bench]:
    return [
        (
            "resnet50 checkpointing",
            partial(remat_saving, "tiny" if quick else "resnet50", 16 if quick else 128),
        )
    ]


def _resnet50_inference_benches(quick: bool, spec: Any) -> list[Bench]:
    from tfaccel.bench import inference
    from tfaccel.workloads.builtin import resnet50

    return [
        (
            f"resnet50 inference {precision} xla={'on' if x else 'off'}",
            partial(
                inference.forward_throughput,
                "resnet50",
                lambda: resnet50().model,
                8 if quick else 256,
                precision,
                x,
                3 if quick else 5,
                2 if quick else 10,
            ),
        )
        for x in (True, False)
        for precision in PAIR
    ]


# The benchmarks `bench NAME` runs besides the micro ones and the workloads: a builder of
# (name, function) pairs each, given quick and the local GPU's spec.
EXTRA: dict[str, Callable[[bool, Any], list[Bench]]] = {
    "yolo": _yolo_benches,
    "conv3d": _conv3d_benches,
    "gpt2": _gpt2_benches,
    "remat": _remat_benches,
    "resnet50-inference": _resnet50_inference_benches,
}


def extra_benches(name: str, quick: bool = False) -> list[Bench] | None:
    """Inference, detection, generation, Conv3D and checkpointing benchmarks by name."""
    builder = EXTRA.get(name)
    return builder(quick, local_spec()) if builder else None


def remat_saving(workload: str, batch: int) -> Measurement:
    """Peak GPU memory of a training step with and without gradient checkpointing."""
    from tfaccel.optimize.settings import Settings
    from tfaccel.trial.runner import StepPlan, run_trial

    peaks: dict[bool, int | None] = {}
    errors: list[str] = []
    how = None
    for remat in (False, True):
        trial = run_trial(
            workload,
            Settings(
                precision="float32", xla="off", batch_size=batch, gradient_checkpointing=remat
            ),
            StepPlan(3, 2, 3),
        )
        peaks[remat] = trial.peak_memory_bytes
        how = trial.extra.get("checkpointing", how)
        if not trial.ok:
            errors.append(
                f"checkpointing {'on' if remat else 'off'}: {trial.status} ({trial.error})"
            )
        elif trial.device != "GPU":
            gpu = "needs a GPU (peak memory is read from TensorFlow's GPU allocator)"
            if gpu not in errors:
                errors.append(gpu)
    name = f"{workload} peak memory, gradient checkpointing off -> on, batch {batch}"
    off, with_remat = peaks[False], peaks[True]
    if errors or not off or not with_remat:
        return Measurement(name, "% saved", (), error="; ".join(errors) or "no peak was read")
    saving = 100.0 * (1 - with_remat / off)
    return Measurement(
        name,
        "% saved",
        (saving,),
        params={"peak_off_bytes": peaks[False], "peak_on_bytes": peaks[True], "how": how},
    )


QUICK_BATCH = 8  # --quick without --batch: a few seconds a step even on a laptop's CPU


def select(what: list[str], quick: bool = False, batch: int | None = None) -> list[Bench]:
    """The benchmarks `tfaccel bench WHAT...` runs: micro, all, an extra one by name
    (EXTRA), or a workload (built-in or module:function) at `batch` (or its own)."""
    from tfaccel.workloads import BUILTIN, BUILTINS

    def batch_for(workload: str) -> int:
        row = BUILTINS.get(workload)
        return batch or (QUICK_BATCH if quick else row.bench_batch if row else 64)

    benches: list[Bench] = []
    for item in what:
        if item == "micro":
            benches += micro_benches(quick)
        elif item == "all":
            benches += micro_benches(quick)
            for builtin in (name for name, row in BUILTINS.items() if row.in_bench_all):
                benches += workload_benches(builtin, batch_for(builtin), quick)
            for extra in ("resnet50-inference", "yolo", "gpt2", "conv3d", "remat"):
                benches += extra_benches(extra, quick) or []
        elif (found := extra_benches(item, quick)) is not None:
            benches += found
        elif item in BUILTIN or ":" in item:
            benches += workload_benches(item, batch_for(item), quick)
        else:
            raise InputError(
                f"Unknown benchmark {item!r}",
                expected="micro, all, compare, or one of " + ", ".join(BUILTIN),
                received=item,
            )
    return benches
