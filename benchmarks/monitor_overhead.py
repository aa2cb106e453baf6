"""GpuMonitorCallback's overhead on a training step (target: under 1 %).

Runs ResNet-50 `fit` with and without the callback, alternating A/B/B/A in one process
after one shared warm-up, and reports the ratio of median step times. Run on the GPU
machine:

    python benchmarks/monitor_overhead.py --out monitor-overhead.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--interval", type=float, default=0.5)
    args = ap.parse_args()
    if args.out.exists():
        raise SystemExit(f"refusing to overwrite {args.out}")
    import tfaccel

    tfaccel.configure(precision="auto", xla="jit")
    import keras
    import numpy as np
    import tensorflow as tf

    from tfaccel.environment import environment
    from tfaccel.monitor import GpuMonitorCallback
    from tfaccel.workloads import load_workload

    wl = load_workload("resnet50")
    model = wl.model
    model.compile(optimizer="sgd", loss=wl.loss, jit_compile=True)
    x = np.random.default_rng(0).standard_normal((args.batch, 224, 224, 3)).astype("float32")
    y = np.zeros((args.batch,), "int32")
    ds = tf.data.Dataset.from_tensors((x, y)).repeat().prefetch(2)

    class Timer(keras.callbacks.Callback):
        """The whole fit, and the steady steps (from step 10 on) apart: the callback's
        per-step cost is what training pays; starting and stopping it is paid once."""

        def on_train_begin(self, logs=None):  # type: ignore[no-untyped-def]
            self.t0 = time.perf_counter()
            self.ends: list[float] = []

        def on_train_batch_end(self, batch, logs=None):  # type: ignore[no-untyped-def]
            self.ends.append(time.perf_counter())

        def on_train_end(self, logs=None):  # type: ignore[no-untyped-def]
            self.seconds = time.perf_counter() - self.t0
            self.steady = (self.ends[-1] - self.ends[9]) / (len(self.ends) - 10)

    model.fit(ds, steps_per_epoch=20, epochs=1, verbose=0)  # warm-up and XLA compile
    runs: dict[str, list[float]] = {"without": [], "with": []}
    fits: dict[str, list[float]] = {"without": [], "with": []}
    for i in range(args.rounds):
        # ABBA order, so that neither side always runs first (warmer caches, clocks).
        for name in ("without", "with") if i % 2 == 0 else ("with", "without"):
            timer = Timer()
            cbs = [timer] + (
                [GpuMonitorCallback(interval_s=args.interval, batch_size=args.batch)]
                if name == "with"
                else []
            )
            model.fit(ds, steps_per_epoch=args.steps, epochs=1, verbose=0, callbacks=cbs)
            runs[name].append(timer.steady)
            fits[name].append(timer.seconds)
    a, b = statistics.median(runs["without"]), statistics.median(runs["with"])
    fa, fb = statistics.median(fits["without"]), statistics.median(fits["with"])
    result = {
        "schema": "tfaccel.monitor-overhead/1",
        "environment": environment(),
        "settings": vars(args) | {"out": str(args.out)},
        "step_s_without": runs["without"],
        "step_s_with": runs["with"],
        "overhead_pct": 100.0 * (b - a) / a,
        "fit_s_without": fits["without"],
        "fit_s_with": fits["with"],
        "fit_overhead_pct": 100.0 * (fb - fa) / fa,
    }
    args.out.write_text(json.dumps(result, indent=1))
    print(
        f"median steady step {a * 1e3:.2f} ms without, {b * 1e3:.2f} ms with: "
        f"overhead {result['overhead_pct']:+.2f} %; whole {args.steps}-step fit "
        f"{fa:.2f} s vs {fb:.2f} s ({result['fit_overhead_pct']:+.2f} %, start and stop "
        "included)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
