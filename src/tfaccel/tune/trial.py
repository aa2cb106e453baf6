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
import sys
import time
import traceback
from typing import Any

MARK = "TFACCEL_TRIAL "


def _synthetic(model: Any, wl: Any, batch: int) -> Any:
    import tensorflow as tf

    from tfaccel.workloads.synthetic import synthetic_inputs, synthetic_labels

    x = synthetic_inputs(model, batch)
    return tf.data.Dataset.from_tensors((x, synthetic_labels(wl, batch))).repeat()


def _user_dataset(ds: Any, batch: int) -> Any:
    """The workload's dataset of examples, batched at the trial's batch size."""
    import tensorflow as tf

    spec = tf.nest.flatten(ds.element_spec)[0]
    if spec.shape.rank and spec.shape[0] is None:  # already batched: re-batch
        ds = ds.unbatch()
    return ds.repeat().batch(batch, drop_remainder=True)


def run(config: dict[str, Any]) -> dict[str, Any]:
    from tfaccel.optimize import Settings, configure

    settings = Settings(**config["settings"])
    steps = config["steps"]
    warmup, windows, window = int(steps["warmup"]), int(steps["windows"]), int(steps["window"])
    spe = settings.steps_per_execution
    # Windows must be whole executions.
    window = max(spe, (window + spe - 1) // spe * spe)
    warmup = max(spe, (warmup + spe - 1) // spe * spe)
    total = warmup + windows * window
    report = configure(settings)

    import keras
    import tensorflow as tf

    from tfaccel.workloads import load_workload

    keras.utils.set_random_seed(int(config.get("seed", 0)))
    with report.strategy_scope(), report.remat_scope():
        wl = load_workload(config["workload"])
        model = wl.model
        report.compile(model, optimizer=wl.optimizer, loss=wl.loss)
    batch = settings.batch_size or 32
    ds = _synthetic(model, wl, batch) if wl.dataset is None else _user_dataset(wl.dataset, batch)
    ds = report.dataset(ds)
    marks: list[tuple[int, float, float]] = []

    class Clock(keras.callbacks.Callback):
        def on_train_batch_end(self, batch_index: int, logs: Any = None) -> None:
            loss = float((logs or {}).get("loss", float("nan")))  # forces a device sync
            marks.append((batch_index, time.perf_counter(), loss))

    start = time.perf_counter()
    model.fit(ds, epochs=1, steps_per_epoch=total, verbose=0, callbacks=[Clock()])
    if not marks:
        raise RuntimeError("no training step completed")
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
    peak = None
    if report.gpus:
        try:
            peak = int(tf.config.experimental.get_memory_info("GPU:0")["peak"])
        except Exception:
            peak = None
    return {
        "status": "ok",
        "precision": report.precision,
        "compile_s": max(0.0, first_end - start - steady_step * spe),
        "window_samples_per_s": timed,
        "peak_memory_bytes": peak,
        "losses": [loss for _, _, loss in marks[:20]],
        "final_loss": marks[-1][2],
        "steps": total,
        "device": "GPU" if report.gpus else "CPU",
    }


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
            "error": text.splitlines()[0][:500],
            "traceback": traceback.format_exc()[-3000:],
        }
    print(MARK + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
