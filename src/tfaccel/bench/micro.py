"""Micro benchmarks: matmul TFLOP/s, memory bandwidth, launch latency, all-reduce."""

from __future__ import annotations

from typing import Any

from tfaccel._tf import import_tensorflow
from tfaccel.bench.timer import Measurement, Skipped, measure

MATMUL_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 4096, 4096))
LAUNCH_TARGET_US = 10.0


def sync_device(out: Any) -> None:
    """Wait until the device has finished `out` (and everything queued before it)."""
    tf = import_tensorflow()
    if hasattr(tf.test.experimental, "sync_devices"):
        tf.test.experimental.sync_devices()
    elif out is not None:
        tf.reshape(out, [-1])[:1].numpy()


def _device(tf: Any) -> str:
    return "/GPU:0" if tf.config.list_logical_devices("GPU") else "/CPU:0"


def matmul(
    dtype: str = "bfloat16",
    shape: tuple[int, int, int] = (8192, 8192, 8192),
    tf32: bool = True,
    peak: float | None = None,
    repeats: int = 7,
    number: int = 10,
) -> Measurement:
    """TFLOP/s of C = A @ B (2*M*N*K FLOPs); the inputs are random, not zeros."""
    tf = import_tensorflow()
    m, n, k = shape
    tf.config.experimental.enable_tensor_float_32_execution(tf32)
    try:
        with tf.device(_device(tf)):
            a = tf.cast(tf.random.normal((m, k)), dtype)
            b = tf.cast(tf.random.normal((k, n)), dtype)
            product = tf.function(lambda: tf.linalg.matmul(a, b), jit_compile=False)
            label = dtype if dtype != "float32" else ("float32 (TF32)" if tf32 else "float32")
            return measure(
                f"matmul {label} {m}x{n}x{k}",
                product,
                work=2.0 * m * n * k / 1e12,
                unit="TFLOP/s",
                sync=sync_device,
                repeats=repeats,
                number=number,
                params={"dtype": dtype, "shape": shape, "tf32": tf32},
                peak=peak,
            )
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(True)


def device_bandwidth(
    mib: int = 2048, peak_gbs: float | None = None, repeats: int = 7, number: int = 10
) -> Measurement:
    """Device memory bandwidth from `y = x + v`: one read and one write per element.

    An elementwise `x * 1.0` would be removed by the graph optimizer, so the kernel adds
    a runtime vector the optimizer cannot fold.
    """
    tf = import_tensorflow()
    count = mib * 2**20 // 4
    with tf.device(_device(tf)):
        x = tf.random.uniform((count,), dtype=tf.float32)
        variable = tf.Variable(1.0)
        add = tf.function(lambda: x + variable)
        return measure(
            f"device copy {mib} MiB (read + write)",
            add,
            work=2 * count * 4 / 1e9,
            unit="GB/s",
            sync=sync_device,
            repeats=repeats,
            number=number,
            params={"mib": mib},
            peak=peak_gbs,
        )


def host_transfer(
    direction: str = "h2d", mib: int = 512, pinned: bool = False, repeats: int = 7, number: int = 5
) -> Measurement | Skipped:
    """Host<->device copies. Pageable: to or from a NumPy array (TF first copies the
    array into a tensor of its own, so this is what `tf.constant(array)` on a GPU costs
    a user, host copy included). Pinned: a host tensor
    in TensorFlow's pinned (page-locked) allocator, which is where TF puts the result
    of a device-to-host copy. An H2D copy is asynchronous, so each timed call ends
    with a device sync; D2H copies return only when the data is on the host."""
    import numpy as np

    tf = import_tensorflow()
    if not tf.config.list_logical_devices("GPU"):
        return Skipped("no GPU: there is no host-device transfer to measure")
    count = mib * 2**20 // 4
    gpu = _device(tf)
    if direction == "h2d":
        host = np.random.default_rng(0).random(count, dtype=np.float32)
        if pinned:
            with tf.device(gpu):
                src = tf.constant(host).cpu()  # lands in TF's pinned host memory

            def fn() -> Any:
                # TF keeps a device copy ("mirror") of a host tensor it copied once, and
                # copying the same handle again reuses it (a figure far above PCIe's
                # bandwidth). A fresh CPU identity shares the pinned buffer (no host
                # copy) but has no mirror, so every call really crosses PCIe.
                with tf.device("/cpu:0"):
                    fresh = tf.identity(src)
                with tf.device(gpu):
                    return tf.identity(fresh)
        else:

            def fn() -> Any:
                with tf.device(gpu):
                    return tf.constant(host)
    else:
        with tf.device(gpu):
            dev = tf.random.uniform((count,))

        def fn() -> Any:
            return dev.numpy() if not pinned else tf.identity(dev, name="d2h").cpu()

    return measure(
        f"{direction.upper()} {'pinned' if pinned else 'pageable'} {mib} MiB",
        fn,
        work=count * 4 / 1e9,
        unit="GB/s",
        sync=sync_device,
        repeats=repeats,
        number=number,
        params={"direction": direction, "mib": mib, "pinned": pinned},
    )


def launch_latency(mode: str = "eager", launches: int = 1000, repeats: int = 7) -> Measurement:
    """Microseconds per small-op launch: eager op by op, or inside one tf.function.

    The op is a chain of `sin`: Grappler folds a chain of additions into one AddN
    kernel, which would time nothing; it has no rule that merges `sin` calls.
    """
    tf = import_tensorflow()
    with tf.device(_device(tf)):
        x = tf.ones((16,))
        if mode == "eager":

            def fn() -> Any:
                y = x
                for _ in range(launches):
                    y = tf.math.sin(y)
                return y
        else:

            @tf.function
            def graph() -> Any:
                y = x
                for _ in range(launches):
                    y = tf.math.sin(y)
                return y

            fn = graph
        measurement = measure(
            f"launch latency ({mode})",
            fn,
            work=1.0,
            unit="us",
            sync=sync_device,
            repeats=repeats,
            number=1,
            per_call_time=True,
            params={"mode": mode, "launches": launches},
        )
    per = tuple(sample / launches for sample in measurement.samples)  # per launch
    return Measurement(
        measurement.name,
        "us",
        per,
        higher_is_better=False,
        warmup_s=measurement.warmup_s,
        params={**measurement.params, "target_us": LAUNCH_TARGET_US},
    )


def allreduce(
    mib: int = 256, repeats: int = 5, number: int = 5, devices: list[str] | None = None
) -> Measurement | Skipped:
    """All-reduce bus bandwidth over tf.distribute (NCCL) with every visible GPU.

    Bus bandwidth = bytes x 2 (n - 1) / n / time, NCCL's convention, so figures are
    comparable across GPU counts. None with fewer than two GPUs. `devices` (e.g. two
    logical CPUs) runs the same code path without NCCL, for tests.
    """
    tf = import_tensorflow()
    if devices is None:
        devices = [device.name for device in tf.config.list_logical_devices("GPU")]
        ops, cross = "NCCL", tf.distribute.NcclAllReduce()
    else:
        ops, cross = "ReductionToOneDevice", tf.distribute.ReductionToOneDevice()
    if len(devices) < 2:
        return Skipped(f"needs 2 or more GPUs, {len(devices)} visible")
    count = len(devices)
    strategy = tf.distribute.MirroredStrategy(devices, cross_device_ops=cross)
    elems = mib * 2**20 // 4
    from tfaccel.trial.step import per_replica_values

    values = per_replica_values(
        strategy, lambda ctx: tf.ones((elems,)) * float(ctx.replica_id_in_sync_group)
    )

    def replica_fn(value: Any) -> Any:
        # An all-reduce among the replicas (NCCL), each keeping the sum on its own GPU.
        # strategy.reduce() would instead gather to the host, which times a D2H copy.
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, value)

    @tf.function
    def step() -> Any:
        return strategy.experimental_local_results(strategy.run(replica_fn, args=(values,)))

    bus = elems * 4 * 2 * (count - 1) / count / 1e9
    return measure(
        f"all-reduce {mib} MiB over {count} GPUs (bus bandwidth)",
        step,
        work=bus,
        unit="GB/s",
        sync=sync_device,
        repeats=repeats,
        number=number,
        params={"mib": mib, "gpus": count, "ops": ops},
    )
