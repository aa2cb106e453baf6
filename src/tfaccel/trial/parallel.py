"""The data-parallel path of a trial: tfaccel's step (`trial.step`) under a
MirroredStrategy, XLA per replica and the all-reduce outside it; the same timed
windows as the `fit` path in `trial.child`."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Literal, get_args

from tfaccel._tf import import_tensorflow
from tfaccel.trial.shared import checkpointing, gpu_peak, synthetic_batches
from tfaccel.workloads.synthetic import rebatched

if TYPE_CHECKING:
    from tfaccel.optimize.report import ConfigureReport


def _mirrored(tf: Any, config: dict[str, Any], logical_cpus: int) -> Any:
    """MirroredStrategy over the GPUs, or over `logical_cpus` CPUs, with the all-reduce
    the config names."""
    cross = cross_device_ops(config.get("cross_device_ops", "auto"), config.get("num_packs", 1))
    if logical_cpus > 1:
        cpus = [device.name for device in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(cpus, cross_device_ops=cross)
    return tf.distribute.MirroredStrategy(cross_device_ops=cross)


def _timed(
    trainer: Any, batches: Any, spe: int, warmup: int, windows: int, window: int
) -> tuple[list[float], float, list[float]]:
    """(losses, seconds of the warm-up with its compilation, samples/s of each window)."""
    start = time.perf_counter()
    losses = list(trainer.run(batches, max(1, warmup // spe)))
    compile_s = time.perf_counter() - start
    timed = []
    for _ in range(windows):
        started = time.perf_counter()
        losses += trainer.run(batches, max(1, window // spe))
        steps = max(1, window // spe) * spe
        timed.append(steps * trainer.samples_per_step / (time.perf_counter() - started))
    return losses, compile_s, timed


def run_custom(
    config: dict[str, Any],  # the request's engine options (protocol.ENGINE_KEYS)
    settings: Any,
    report: ConfigureReport,
    wl_name: str,
    logical_cpus: int,
    warmup: int,
    windows: int,
    window: int,
) -> dict[str, Any]:
    """Data parallelism with tfaccel's step: XLA per replica, all-reduce outside it."""
    tf = import_tensorflow()

    from tfaccel.trial.step import DistributedTrainer
    from tfaccel.workloads import load_workload

    strategy = _mirrored(tf, config, logical_cpus)
    replicas = strategy.num_replicas_in_sync
    per_replica = settings.batch_size or 32
    global_batch = per_replica * replicas
    with strategy.scope(), report.remat_scope():
        workload = load_workload(wl_name)
        report.checkpoint(workload.model)  # a Functional graph: by segments
        optimizer = report.optimizer(workload.optimizer)
    staged = config.get("input") == "staged"
    if staged and report.input_dtype is None:
        raise ValueError(
            "input='staged' casts the batches to the 16-bit compute dtype on the host "
            "inside the step; it needs input_cast='compute' and a 16-bit precision"
        )
    trainer = DistributedTrainer(
        workload.model,
        optimizer,
        workload.loss,
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
        if workload.dataset is not None:
            raise ValueError("input='device' replays synthetic batches; this workload has data")
        batches: Any = _device_batches(strategy, workload, per_replica)
    else:

        def replica_input(ctx: Any) -> Any:
            # One pipeline per worker, batched per replica: nothing is split on the host.
            per_replica_batch = ctx.get_per_replica_batch_size(global_batch)
            if workload.dataset is None:
                dataset = synthetic_batches(
                    workload.model, workload, per_replica_batch, report, cast=not staged
                )
            else:
                dataset = workload.dataset
                if ctx.num_input_pipelines > 1:
                    dataset = dataset.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
                dataset = rebatched(dataset, per_replica_batch)
            return report.dataset(dataset, cast=not staged, batch=False)

        batches = trainer.distribute_per_replica(replica_input)
    losses, compile_s, timed = _timed(
        trainer, batches, settings.steps_per_execution, warmup, windows, window
    )
    peak = gpu_peak(report)
    used = getattr(strategy.extended, "_cross_device_ops", None)
    from tfaccel.workloads.synthetic import input_bytes_per_sample

    return {
        "input": config.get("input", "host"),
        "input_bytes_per_sample": input_bytes_per_sample(
            workload.model, 2 if report.input_dtype else None, workload.dataset
        ),
        "status": "ok",
        "precision": report.precision,
        "engine": "tfaccel step",
        "update": trainer.update_path,
        "update_error": trainer.update_error,
        "cross_device_ops": type(used).__name__ if used is not None else "default",
        "allreduce_ms": allreduce_ms(strategy, workload.model) if replicas > 1 else None,
        "replicas": replicas,
        "global_batch": global_batch,
        "compile_s": compile_s,
        "window_samples_per_s": timed,
        "peak_memory_bytes": peak,
        "losses": losses[:20],
        "final_loss": losses[-1],
        "steps": (warmup + windows * window),
        "device": "GPU" if report.gpus else "CPU",
        **checkpointing(report),
    }


class _Replay:
    """An iterator that yields the same per-replica batch, already on each device."""

    def __init__(self, batch: Any) -> None:
        self.batch = batch

    def __iter__(self) -> _Replay:
        return self

    def __next__(self) -> Any:
        return self.batch


def _device_batches(strategy: Any, workload: Any, per_replica: int) -> _Replay:
    """Synthetic batches placed on every replica's device once: no host-to-device copy
    per step, so a scaling run measures compute and all-reduce alone."""
    from tfaccel.workloads.synthetic import synthetic_inputs, synthetic_labels

    x = synthetic_inputs(workload.model, per_replica)
    y = synthetic_labels(workload, per_replica)
    from tfaccel.trial.step import per_replica_values

    return _Replay(per_replica_values(strategy, lambda ctx: (x, y)))


AllReduce = Literal["auto", "nccl", "hierarchical", "one-device"]
CROSS_DEVICE_OPS: tuple[str, ...] = get_args(AllReduce)


def cross_device_ops(name: str, num_packs: int = 1) -> Any:
    """tf.distribute's all-reduce implementation by name (None: TensorFlow chooses)."""
    tf = import_tensorflow()

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
    tf = import_tensorflow()

    specs = [(tuple(variable.shape), variable.dtype) for variable in model.trainable_variables]
    from tfaccel.trial.step import per_replica_values

    grads = per_replica_values(
        strategy, lambda ctx: [tf.ones(shape, dtype) for shape, dtype in specs]
    )

    def reduce(grads: Any) -> Any:
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, grads)

    @tf.function
    def step() -> Any:
        out = strategy.run(reduce, args=(grads,))
        return strategy.experimental_local_results(out)[0][0]

    float(tf.reduce_sum(step()))  # warm-up (tracing, NCCL communicator set-up)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        float(tf.reduce_sum(step()))
        times.append((time.perf_counter() - started) * 1e3)
    return sorted(times)[len(times) // 2]
