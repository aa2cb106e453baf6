"""Measure a training step's real peak memory on the local GPU, in a child process.

Each measurement is a fresh process (TensorFlow cannot give GPU memory back): it builds
the model, runs a few `fit` steps on synthetic data of the model's input shapes, and
reports `tf.config.experimental.get_memory_info('GPU:0')['peak']`, or that the batch ran
out of memory (ResourceExhaustedError, or the process was killed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

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
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
    cmd = [
        sys.executable,
        "-m",
        "tfaccel.plan.measure",
        model,
        precision,
        str(batch),
        str(steps),
        "1" if jit else "0",
    ]
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        return MeasuredPeak(
            batch,
            None,
            False,
            time.perf_counter() - start,
            error=f"timed out after {timeout_s:.0f} s",
        )
    elapsed = time.perf_counter() - start
    for line in proc.stdout.splitlines():
        if line.startswith(_MARK):
            d = json.loads(line[len(_MARK) :])
            return MeasuredPeak(batch, d.get("peak"), bool(d.get("oom")), elapsed, d.get("error"))
    killed = proc.returncode < 0 or proc.returncode == 137
    tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
    return MeasuredPeak(batch, None, killed, elapsed, error=f"exit code {proc.returncode}: {tail}")


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
    import tensorflow as tf

    from tfaccel.workloads import load_workload
    from tfaccel.workloads.synthetic import rebatched, synthetic_inputs, synthetic_labels

    out: dict[str, object] = {}
    try:
        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            raise RuntimeError("no GPU visible to TensorFlow")
        keras.mixed_precision.set_global_policy(precision)
        wl = load_workload(model)
        m = wl.model
        m.compile(optimizer=wl.optimizer, loss=wl.loss, jit_compile=jit)
        if wl.dataset is not None:  # the user's own data, at this batch size
            ds = rebatched(wl.dataset, batch).take(steps)
        else:
            x = synthetic_inputs(m, batch)
            y = synthetic_labels(wl, batch)
            ds = tf.data.Dataset.from_tensors((x, y)).repeat(steps)
        m.fit(ds, epochs=1, verbose=0)
        out["peak"] = int(tf.config.experimental.get_memory_info("GPU:0")["peak"])
    except tf.errors.ResourceExhaustedError as exc:
        out = {"oom": True, "error": str(exc).splitlines()[0][:300]}
    except Exception as exc:
        out = {
            "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}",
            "oom": "out of memory" in str(exc).lower() or "OOM" in str(exc),
        }
    print(_MARK + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
