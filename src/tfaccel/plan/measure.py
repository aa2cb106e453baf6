"""Measure a training step's real peak memory on the local GPU, in a child process.

Each measurement is a fresh process (TensorFlow cannot give GPU memory back): it builds
the model, runs a few `fit` steps on synthetic data of the model's input shapes, and
reports `tf.config.experimental.get_memory_info('GPU:0')['peak']`, or that the batch ran
out of memory (ResourceExhaustedError, or the process was killed).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

from tfaccel._child import child_env, emit, error_line, is_oom, run_child
from tfaccel._tf import import_tensorflow
from tfaccel.errors import InputError

_MARK = "TFACCEL_MEASURE "


@dataclass(frozen=True)
class MeasuredPeak:
    batch: int
    peak_bytes: int | None
    oom: bool
    seconds: float
    error: str | None = None


def measure_peak(
    model: str,
    precision: str,
    batch: int,
    steps: int = 3,
    jit: bool = False,
    timeout_s: float = 300.0,
) -> MeasuredPeak:
    """Run `steps` training steps of `model` at `batch` in a child and return its peak."""
    if batch < 1 or steps < 1:
        raise InputError(
            "Batch and steps must be positive",
            expected="integers >= 1",
            received=f"batch={batch}, steps={steps}",
        )
    args = ["-m", "tfaccel.plan.measure", model, precision, str(batch), str(steps)]
    out = run_child([*args, "1" if jit else "0"], _MARK, child_env(), timeout_s)
    if out.timed_out:
        return MeasuredPeak(batch, None, False, out.wall_s, f"timed out after {timeout_s:.0f} s")
    payload = out.payload
    if payload is not None:
        return MeasuredPeak(
            batch, payload.get("peak"), bool(payload.get("oom")), out.wall_s, payload.get("error")
        )
    error = f"{out.exit_text()}: {out.tail(3, ' | ')}"
    return MeasuredPeak(batch, None, out.killed, out.wall_s, error=error)


def find_max_batch(
    fits: Callable[[int], bool], low: int, high: int, tolerance: float = 0.02, max_probes: int = 8
) -> tuple[int, list[int]]:
    """Largest batch in [low, high) for which `fits(batch)` holds, by bisection.

    `low` must fit and `high` must not (callers probe them first). Returns the batch and
    the batch sizes probed.
    """
    probed: list[int] = []
    while high - low > max(1, int(low * tolerance)) and len(probed) < max_probes:
        mid = (low + high) // 2
        probed.append(mid)
        if fits(mid):
            low = mid
        else:
            high = mid
    return low, probed


def _main(argv: list[str]) -> int:
    model, precision, batch, steps, jit = (
        argv[0],
        argv[1],
        int(argv[2]),
        int(argv[3]),
        argv[4] == "1",
    )
    import keras

    tf = import_tensorflow()

    from tfaccel.workloads import load_workload
    from tfaccel.workloads.synthetic import rebatched, synthetic_inputs, synthetic_labels

    out: dict[str, object] = {}
    try:
        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            raise RuntimeError("no GPU visible to TensorFlow")
        keras.mixed_precision.set_global_policy(precision)
        workload = load_workload(model)
        keras_model = workload.model
        keras_model.compile(optimizer=workload.optimizer, loss=workload.loss, jit_compile=jit)
        if workload.dataset is not None:  # the user's own data, at this batch size
            dataset = rebatched(workload.dataset, batch).take(steps)
        else:
            x = synthetic_inputs(keras_model, batch)
            y = synthetic_labels(workload, batch)
            dataset = tf.data.Dataset.from_tensors((x, y)).repeat(steps)
        keras_model.fit(dataset, epochs=1, verbose=0)
        out["peak"] = int(tf.config.experimental.get_memory_info("GPU:0")["peak"])
    except Exception as exc:
        oom = is_oom(exc)
        said = error_line(exc, limit=300)
        out = {"oom": oom, "error": said.partition(": ")[2] if oom else said}
    emit(_MARK, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
