"""One tuning trial, run in a fresh child process.

    python -m tfaccel.tune.trial '{"workload": "tiny", "settings": {...}, "steps": {...}}'

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
import traceback
from typing import Any

from tfaccel.workloads.synthetic import rebatched

MARK = "TFACCEL_TRIAL "
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Keras bolds parts of its error messages


def trial_traceback(exc: BaseException, limit: int = 3000) -> str:
    """The traceback a user needs: where their code raised. When tfaccel wrapped the
    error (an entry point that raised while building the model), the wrapped error's own
    traceback comes first and tfaccel's one-line message after it; tfaccel's frames
    are left out, and a check of tfaccel's own (a subclassed model and no dataset) is its
    message alone. The end is kept when it is long; terminal styling is
    removed."""
    from tfaccel.errors import TfaccelError

    cause = exc.__cause__
    if isinstance(exc, TfaccelError) and cause is None:  # tfaccel's own check: no frames
        text = f"{type(exc).__name__}: {exc}\n"
    elif isinstance(exc, TfaccelError):
        first = str(exc).splitlines()[0] if str(exc) else ""
        text = "".join(traceback.format_exception(cause)) + f"{type(exc).__name__}: {first}\n"
    else:
        text = "".join(traceback.format_exception(exc))
    return _ANSI.sub("", text)[-limit:]


def _synthetic(model: Any, wl: Any, batch: int, report: Any, cast: bool = True) -> Any:
    """One synthetic batch, repeated. With `input_cast="compute"` its float inputs are
    cast once, here, instead of every step in the pipeline: the batch is a constant, and
    re-casting it each step would time host work a real pipeline does not repeat.
    `cast=False`: as the model takes them (the step casts them itself)."""
    import tensorflow as tf

    from tfaccel.workloads.synthetic import synthetic_inputs, synthetic_labels

    x = synthetic_inputs(model, batch)
    element = (x, synthetic_labels(wl, batch))
    if cast:
        element = report.cast_inputs(element)
    return tf.data.Dataset.from_tensors(element).repeat()


def _gpu_peak(report: Any) -> int | None:
    """TensorFlow's peak allocation on GPU 0 (None without a GPU)."""
    if not report.gpus:
        return None
    import tensorflow as tf

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
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * logical_cpus
        )
    report = configure(settings)

    import keras
    import tensorflow as tf

    from tfaccel.workloads import load_workload

    keras.utils.set_random_seed(int(config.get("seed", 0)))
    engine = config.get("engine", "auto")
    replicas = logical_cpus if logical_cpus > 1 else report.gpus
    mirrored = settings.strategy == "mirrored" or (settings.strategy == "auto" and replicas > 1)
    if mirrored and engine != "fit":
        return _run_custom(
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
        _synthetic(model, wl, batch, report) if wl.dataset is None else rebatched(wl.dataset, batch)
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
    peak = _gpu_peak(report)
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
        **_checkpointing(report),
    }


def _checkpointing(report: Any) -> dict[str, Any]:
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


def _run_custom(
    config: dict[str, Any],
    settings: Any,
    report: Any,
    wl_name: str,
    logical_cpus: int,
    warmup: int,
    windows: int,
    window: int,
) -> dict[str, Any]:
    """Data parallelism with tfaccel's step: XLA per replica, all-reduce outside it."""
    import tensorflow as tf

    from tfaccel.scale.step import DistributedTrainer
    from tfaccel.workloads import load_workload

    cross = cross_device_ops(config.get("cross_device_ops", "auto"), config.get("num_packs", 1))
    if logical_cpus > 1:
        strategy = tf.distribute.MirroredStrategy(
            [d.name for d in tf.config.list_logical_devices("CPU")], cross_device_ops=cross
        )
    else:
        strategy = tf.distribute.MirroredStrategy(cross_device_ops=cross)
    n = strategy.num_replicas_in_sync
    per_replica = settings.batch_size or 32
    global_batch = per_replica * n
    with strategy.scope(), report.remat_scope():
        wl = load_workload(wl_name)
        report.checkpoint(wl.model)  # a Functional graph: by segments
        optimizer = report.optimizer(wl.optimizer)
    staged = config.get("input") == "staged"
    if staged and report.input_dtype is None:
        raise ValueError(
            "input='staged' casts the batches to the 16-bit compute dtype on the host "
            "inside the step; it needs input_cast='compute' and a 16-bit precision"
        )
    trainer = DistributedTrainer(
        wl.model,
        optimizer,
        wl.loss,
        strategy,
        global_batch,
        # "auto" is Keras' default, which compiles with XLA on a GPU: so does this step
        # (tune's file may say "auto" when Keras' defaults won, as for BERT in TF32).
        jit=settings.xla == "jit" or (settings.xla == "auto" and bool(report.gpus)),
        steps_per_execution=settings.steps_per_execution,
        loss_scale=2.0**15 if report.precision == "mixed_float16" else None,
        host_cast=report.input_dtype if staged else None,
    )
    if config.get("input") == "device":
        if wl.dataset is not None:
            raise ValueError("input='device' replays synthetic batches; this workload has data")
        it: Any = _device_batches(strategy, wl, per_replica)
    else:

        def replica_input(ctx: Any) -> Any:
            # One pipeline per worker, batched per replica: nothing is split on the host.
            b = ctx.get_per_replica_batch_size(global_batch)
            if wl.dataset is None:
                ds = _synthetic(wl.model, wl, b, report, cast=not staged)
            else:
                ds = wl.dataset
                if ctx.num_input_pipelines > 1:
                    ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
                ds = rebatched(ds, b)
            return report.dataset(ds, cast=not staged)

        it = trainer.distribute_per_replica(replica_input)
    spe = settings.steps_per_execution
    start = time.perf_counter()
    losses = trainer.run(it, max(1, warmup // spe))
    first_end = time.perf_counter()
    timed = []
    for _ in range(windows):
        t0 = time.perf_counter()
        losses += trainer.run(it, max(1, window // spe))
        steps = max(1, window // spe) * spe
        timed.append(steps * trainer.samples_per_step / (time.perf_counter() - t0))
    peak = _gpu_peak(report)
    used = getattr(strategy.extended, "_cross_device_ops", None)
    from tfaccel.workloads.synthetic import input_bytes_per_sample

    return {
        "input": config.get("input", "host"),
        "input_bytes_per_sample": input_bytes_per_sample(
            wl.model, 2 if report.input_dtype else None, wl.dataset
        ),
        "status": "ok",
        "precision": report.precision,
        "engine": "tfaccel step",
        "update": trainer.update_path,
        "update_error": trainer.update_error,
        "cross_device_ops": type(used).__name__ if used is not None else "default",
        "allreduce_ms": allreduce_ms(strategy, wl.model) if n > 1 else None,
        "replicas": n,
        "global_batch": global_batch,
        "compile_s": first_end - start,
        "window_samples_per_s": timed,
        "peak_memory_bytes": peak,
        "losses": losses[:20],
        "final_loss": losses[-1],
        "steps": (warmup + windows * window),
        "device": "GPU" if report.gpus else "CPU",
        **_checkpointing(report),
    }


class _Replay:
    """An iterator that yields the same per-replica batch, already on each device."""

    def __init__(self, batch: Any) -> None:
        self.batch = batch

    def __iter__(self) -> _Replay:
        return self

    def __next__(self) -> Any:
        return self.batch


def _device_batches(strategy: Any, wl: Any, per_replica: int) -> _Replay:
    """Synthetic batches placed on every replica's device once: no host-to-device copy
    per step, so a scaling run measures compute and all-reduce alone."""
    from tfaccel.workloads.synthetic import synthetic_inputs, synthetic_labels

    x = synthetic_inputs(wl.model, per_replica)
    y = synthetic_labels(wl, per_replica)
    from tfaccel.scale.step import per_replica_values

    return _Replay(per_replica_values(strategy, lambda ctx: (x, y)))


CROSS_DEVICE_OPS = ("auto", "nccl", "hierarchical", "one-device")


def cross_device_ops(name: str, num_packs: int = 1) -> Any:
    """tf.distribute's all-reduce implementation by name (None: TensorFlow chooses)."""
    import tensorflow as tf

    if name == "auto":
        return None
    if name == "nccl":
        return tf.distribute.NcclAllReduce(num_packs=num_packs)
    if name == "hierarchical":
        return tf.distribute.HierarchicalCopyAllReduce(num_packs=num_packs)
    if name == "one-device":
        return tf.distribute.ReductionToOneDevice()
    raise ValueError(f"unknown cross-device ops {name!r}; expected one of {CROSS_DEVICE_OPS}")


def allreduce_ms(strategy: Any, model: Any, repeats: int = 5) -> float:
    """Milliseconds for one all-reduce of tensors shaped like the model's gradients,
    through the strategy's own cross-device ops (with its packing), measured alone."""
    import tensorflow as tf

    specs = [(tuple(v.shape), v.dtype) for v in model.trainable_variables]
    from tfaccel.scale.step import per_replica_values

    grads = per_replica_values(strategy, lambda ctx: [tf.ones(s, d) for s, d in specs])

    def reduce(gs: Any) -> Any:
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, gs)

    @tf.function
    def step() -> Any:
        out = strategy.run(reduce, args=(grads,))
        return strategy.experimental_local_results(out)[0][0]

    float(tf.reduce_sum(step()))  # warm-up (tracing, NCCL communicator set-up)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        float(tf.reduce_sum(step()))
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def main(argv: list[str]) -> int:
    config = json.loads(argv[0])
    try:
        out = run(config)
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        oom = (
            type(exc).__name__ == "ResourceExhaustedError"
            or "RESOURCE_EXHAUSTED" in text
            or "out of memory" in text.lower()
        )
        out = {
            "status": "oom" if oom else "error",
            "error": _ANSI.sub("", text.splitlines()[0])[:500],
            "traceback": trial_traceback(exc),
        }
    print(MARK + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
