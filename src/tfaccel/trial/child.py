"""One tuning trial, run in a fresh child process.

    python -m tfaccel.trial.child '{"workload": "tiny", "settings": {...}, "steps": {...}}'

It applies the settings with tfaccel.configure (before TensorFlow starts), builds the
workload, and runs `fit` on synthetic data of the model's input shapes (or the
workload's own dataset). Throughput is timed per window of steps after warm-up; the
time to the first step (tracing and XLA compilation) is reported apart. The result is
one JSON line; an out-of-memory error is a result ("oom"), not a crash.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from typing import Any

from tfaccel._child import ANSI, emit, is_oom, user_traceback
from tfaccel._tf import import_tensorflow
from tfaccel.workloads.synthetic import rebatched

MARK = "TFACCEL_TRIAL "


def synthetic_batches(model: Any, wl: Any, batch: int, report: Any, cast: bool = True) -> Any:
    """One synthetic batch, repeated. With `input_cast="compute"` its float inputs are
    cast once, here, instead of every step in the pipeline: the batch is a constant, and
    re-casting it each step would time host work a real pipeline does not repeat.
    `cast=False`: as the model takes them (the step casts them itself)."""
    tf = import_tensorflow()

    from tfaccel.workloads.synthetic import synthetic_inputs, synthetic_labels

    x = synthetic_inputs(model, batch)
    element = (x, synthetic_labels(wl, batch))
    if cast:
        element = report.cast_inputs(element)
    return tf.data.Dataset.from_tensors(element).repeat()


def gpu_peak(report: Any) -> int | None:
    """TensorFlow's peak allocation on GPU 0 (None without a GPU)."""
    if not report.gpus:
        return None
    tf = import_tensorflow()

    try:
        return int(tf.config.experimental.get_memory_info("GPU:0")["peak"])
    except Exception:
        return None


def own_executable_cache(options: tuple[str, ...]) -> None:
    """TensorFlow's persistent XLA cache keys an executable by its program, not by XLA's
    flags: a trial with other XLA options would load another trial's executable and time
    that. Such a trial gets a cache directory of its own."""
    flags = os.environ.get("TF_XLA_FLAGS", "")
    found = re.search(r"--tf_xla_persistent_cache_directory=(\S+)", flags)
    if not options or not found:
        return
    own = os.path.join(found.group(1), "xla-options-" + "-".join(options))
    os.makedirs(own, exist_ok=True)
    os.environ["TF_XLA_FLAGS"] = flags.replace(
        found.group(0), f"--tf_xla_persistent_cache_directory={own}"
    )


def run(config: dict[str, Any]) -> dict[str, Any]:
    from tfaccel.optimize import Settings, configure
    from tfaccel.optimize.attention import cudnn_calls

    settings = Settings(**config["settings"])
    own_executable_cache(settings.effective_xla_options)
    steps = config["steps"]
    warmup, windows, window = int(steps["warmup"]), int(steps["windows"]), int(steps["window"])
    spe = settings.steps_per_execution
    # Windows must be whole executions.
    window = max(spe, (window + spe - 1) // spe * spe)
    warmup = max(spe, (warmup + spe - 1) // spe * spe)
    total = warmup + windows * window
    logical_cpus = int(config.get("logical_cpus", 0))
    if logical_cpus > 1:  # CPU-only tests of multi-replica code: split the CPU
        tf = import_tensorflow()

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * logical_cpus
        )
    report = configure(settings)

    import keras

    tf = import_tensorflow()

    from tfaccel.workloads import load_workload

    keras.utils.set_random_seed(int(config.get("seed", 0)))
    engine = config.get("engine", "auto")
    replicas = logical_cpus if logical_cpus > 1 else report.gpus
    mirrored = settings.strategy == "mirrored" or (settings.strategy == "auto" and replicas > 1)
    if mirrored and engine != "fit":
        from tfaccel.trial.parallel import run_custom

        return run_custom(
            config,
            settings,
            report,
            wl_name=config["workload"],
            logical_cpus=logical_cpus,
            warmup=warmup,
            windows=windows,
            window=window,
        )
    with report.strategy_scope(), report.remat_scope():
        wl = load_workload(config["workload"])
        model = wl.model
        report.compile(model, optimizer=wl.optimizer, loss=wl.loss)
    batch = settings.batch_size or 32
    ds = (
        synthetic_batches(model, wl, batch, report)
        if wl.dataset is None
        else rebatched(wl.dataset, batch)
    )
    ds = report.dataset(ds)
    marks: list[tuple[int, float, float]] = []
    window_s = steps.get("window_s")
    plan = {"window": window, "total": total}

    class Clock(keras.callbacks.Callback):
        def on_train_batch_end(self, batch_index: int, logs: Any = None) -> None:
            loss = float((logs or {}).get("loss", float("nan")))  # forces a device sync
            marks.append((batch_index, time.perf_counter(), loss))
            if batch_index == warmup - 1 and window_s:
                step_s = warmup_step_s(marks)
                if step_s:
                    plan["window"] = shrink_window(window, spe, step_s, float(window_s))
                    plan["total"] = warmup + windows * plan["window"]
            if batch_index + 1 >= plan["total"]:
                self.model.stop_training = True

    start = time.perf_counter()
    model.fit(ds, epochs=1, steps_per_epoch=total, verbose=0, callbacks=[Clock()])
    if not marks:
        raise RuntimeError("no training step completed")
    window, total = plan["window"], plan["total"]
    # marks[i] ends step marks[i][0] (the last step of its execution).
    first_end = marks[0][1]
    ends = {b: t for b, t, _ in marks}
    timed: list[float] = []
    for w in range(windows):
        a = warmup + w * window - 1
        b = a + window
        if a in ends and b in ends and ends[b] > ends[a]:
            timed.append(window * batch / (ends[b] - ends[a]))
    steady_step = (marks[-1][1] - ends.get(warmup - 1, first_end)) / max(1, total - warmup)
    peak = gpu_peak(report)
    flops, gemm_share = _flops(model) if config.get("count_flops") else (None, None)
    return {
        "forward_flops_per_sample": flops,
        "gemm_flop_share": gemm_share,
        **_layer_counts(model),
        **({"float8_layers": len(report.float8_layers)} if settings.float8 else {}),
        **({"cudnn_attention_calls": cudnn_calls()} if settings.attention == "cudnn" else {}),
        "status": "ok",
        "precision": report.precision,
        "compile_s": max(0.0, first_end - start - steady_step * spe),
        "window_samples_per_s": timed,
        "peak_memory_bytes": peak,
        "losses": [loss for _, _, loss in marks[:20]],
        "final_loss": marks[-1][2],
        "steps": total,
        "window": window,
        "device": "GPU" if report.gpus else "CPU",
        "jit_compile": bool(getattr(model, "jit_compile", False)),
        **checkpointing(report),
    }


def checkpointing(report: Any) -> dict[str, Any]:
    """How gradient checkpointing was applied: segments of a graph, or layer by layer."""
    if not report.settings.gradient_checkpointing:
        return {}
    plans = report.checkpointing
    how = "; ".join(p.describe() for p in plans) if plans else "each layer recomputed alone"
    return {"checkpointing": how}


def _layer_counts(model: Any) -> dict[str, int | None]:
    """How many dropout layers with a rate above 0, MultiHeadAttention layers, of those
    the ones with dropout, and EinsumDense layers the model holds, nested ones (a
    MultiHeadAttention's dropout and projections, KerasHub's attention subclasses)
    included; None each if the model cannot say."""
    import keras

    names = ("dropout_layers", "attention_layers", "attention_dropout_layers", "einsum_layers")
    try:
        layers = list(model._flatten_layers(include_self=False, recursive=True))
    except Exception:
        return dict.fromkeys(names)
    drop = [x for x in layers if isinstance(x, keras.layers.Dropout)]
    mha = [x for x in layers if isinstance(x, keras.layers.MultiHeadAttention)]
    counts = (
        sum(1 for x in drop if x.rate > 0),
        len(mha),
        sum(1 for x in mha if float(x._dropout) > 0),
        sum(1 for x in layers if isinstance(x, keras.layers.EinsumDense)),
    )
    return dict(zip(names, counts, strict=True))


def _flops(model: Any) -> tuple[int | None, float | None]:
    """(Forward product FLOPs per sample, the matrix products' share of them)
    (tfaccel.workloads.flops), or (None, None)."""
    from tfaccel.workloads.flops import forward_flops

    try:
        return forward_flops(model)
    except Exception:
        return None, None


def warmup_step_s(marks: list[tuple[int, float, float]]) -> float | None:
    """Seconds per step in the warm-up after its first execution (which compiles), from
    the (last step, time, loss) marks so far; None with fewer than two later marks."""
    if len(marks) < 3:
        return None
    (b0, t0, _), (b1, t1, _) = marks[1], marks[-1]
    return (t1 - t0) / (b1 - b0) if b1 > b0 and t1 > t0 else None


def shrink_window(window: int, spe: int, step_s: float, window_s: float) -> int:
    """Steps per timed window: `window`, or fewer (whole executions, at least one) when
    `window` steps of `step_s` would take longer than `window_s`."""
    if step_s * window <= window_s:
        return window
    executions = max(1, math.ceil(window_s / step_s / spe))
    return min(window, executions * spe)


def main(argv: list[str]) -> int:
    config = json.loads(argv[0])
    try:
        out = run(config)
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        out = {
            "status": "oom" if is_oom(exc) else "error",
            "error": ANSI.sub("", text.splitlines()[0])[:500],
            "traceback": user_traceback(exc),
        }
    emit(MARK, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
