"""What both bodies of a trial share: the one-device child (`trial.child`) and the
several-device one (`trial.parallel`): the synthetic batch, the GPU's peak memory, how
gradient checkpointing was applied, which loss a step's logs carry (the race's too).
Below both, so that neither imports the other's module for them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tfaccel._tf import import_tensorflow

if TYPE_CHECKING:
    from tfaccel.optimize.report import ConfigureReport


def synthetic_batches(
    model: Any, workload: Any, batch: int, report: ConfigureReport, cast: bool = True
) -> Any:
    """One synthetic batch, repeated. With `input_cast="compute"` its float inputs are
    cast once, here, instead of every step in the pipeline: the batch is a constant, and
    re-casting it each step would time host work a real pipeline does not repeat.
    `cast=False`: as the model takes them (the step casts them itself)."""
    tf = import_tensorflow()

    from tfaccel.workloads.synthetic import synthetic_inputs, synthetic_labels

    x = synthetic_inputs(model, batch)
    element = (x, synthetic_labels(workload, batch))
    if cast:
        element = report.cast_inputs(element)
    return tf.data.Dataset.from_tensors(element).repeat()


def gpu_peak(report: ConfigureReport) -> int | None:
    """TensorFlow's peak allocation on GPU 0 (None without a GPU)."""
    if not report.gpus:
        return None
    tf = import_tensorflow()

    try:
        return int(tf.config.experimental.get_memory_info("GPU:0")["peak"])
    except Exception:
        return None


def checkpointing(report: ConfigureReport) -> dict[str, Any]:
    """How gradient checkpointing was applied: segments of a graph, or layer by layer."""
    if not report.settings.gradient_checkpointing:
        return {}
    plans = report.checkpointing
    how = "; ".join(plan.describe() for plan in plans) if plans else "each layer recomputed alone"
    return {"checkpointing": how}


def loss_key(logs: Any, keras_loss: bool = True) -> Any:
    """Which entry of a step's (or an evaluation's) logs is its loss: Keras' "loss";
    else the first entry named like one (a GAN's own train_step returns "d_loss" and
    "g_loss"); else the first entry; None where there is none. Without it, a model
    whose logs have no "loss" recorded NaN at every step, and the accuracy guard refused
    each of its 16-bit trials as "the loss became NaN". `keras_loss=False`: the "loss"
    entry is not a loss (`trial.race.ShimWatch`), so only another named like one."""
    logs = logs or {}
    if keras_loss and "loss" in logs:
        return "loss"
    named = next((k for k in logs if "loss" in str(k) and k != "loss"), None)
    return named if named is not None or not keras_loss else next(iter(logs), None)


def logged_loss(logs: Any, keras_loss: bool = True) -> float:
    """The value of `loss_key`'s entry (a mean, where it holds several); NaN where
    there is none or it is not a number."""
    key = loss_key(logs, keras_loss)
    if key is None:
        return float("nan")
    try:
        import numpy as np

        return float(np.mean(np.asarray(logs[key], dtype="float64")))
    except (TypeError, ValueError):
        return float("nan")
