"""One tuning trial, run in a fresh child process.

    python -m tfaccel.trial.child '{"workload": "tiny", "settings": {...}, "steps": {...}}'

It applies the settings with tfaccel.configure (before TensorFlow starts), builds the
workload, and runs `fit` on synthetic data of the model's input shapes (or the
workload's own dataset). Throughput is timed per window of steps after warm-up; the
time to the first step (tracing and XLA compilation) is reported apart. The result is
one JSON line; an out-of-memory error is a result ("oom"), not a crash.
"""

from __future__ import annotations

import collections
import dataclasses
import inspect
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tfaccel import stats
from tfaccel._child import emit, end_process, failure
from tfaccel._tf import import_tensorflow, tf_internal
from tfaccel.optimize.settings import LAYER_KNOBS
from tfaccel.trial import noise_scale, xla_cache
from tfaccel.trial.protocol import (
    MARK,
    TrialRequest,
    determinism_withholds_xla,
    layers_in_words,
)
from tfaccel.trial.race import ShimWatch, data_facts
from tfaccel.trial.shared import checkpointing, gpu_peak, logged_loss, synthetic_batches
from tfaccel.workloads.synthetic import rebatched

if TYPE_CHECKING:
    from tfaccel.optimize.report import ConfigureReport

# When this process's trial began (near the interpreter's start; a script's hook passes
# its own): `setup_s`, the time to `fit` (TensorFlow's import, the build, the data).
STARTED = time.perf_counter()


@dataclass(frozen=True)
class Plan:
    """A trial's steps: warm-up, then `windows` timed windows of `window` steps (whole
    executions of steps_per_execution), shortened to about `window_s` seconds each
    where the warm-up shows slow steps."""

    warmup: int
    windows: int
    window: int
    spe: int
    window_s: float | None = None
    min_windows: int | None = None  # runner.StepPlan's

    @classmethod
    def of(cls, steps: dict[str, Any], spe: int) -> Plan:
        whole = lambda count: max(spe, (int(count) + spe - 1) // spe * spe)  # noqa: E731
        window_s = steps.get("window_s")
        least = steps.get("min_windows")
        return cls(
            whole(steps["warmup"]),
            int(steps["windows"]),
            whole(steps["window"]),
            spe,
            float(window_s) if window_s else None,
            int(least) if least else None,
        )

    def rates(self, ends: dict[int, float], batch: int) -> list[float]:
        """Samples/s of each timed window that `ends` (step -> time it ended) holds."""
        out = []
        for window in range(self.windows):
            first = self.warmup + window * self.window - 1
            last = first + self.window
            if first in ends and last in ends and ends[last] > ends[first]:
                out.append(self.window * batch / (ends[last] - ends[first]))
        return out

    def settled_after(self, step: int, ends: dict[int, float], batch: int) -> int | None:
        """How many windows to keep if timing may stop at the end of `step`: the windows
        so far, where `min_windows` of them have ended and settled (stats.settled)."""
        done = (step + 1 - self.warmup) // self.window
        if self.min_windows is None or done < self.min_windows or done >= self.windows:
            return None
        if (step + 1 - self.warmup) % self.window:
            return None
        return done if stats.settled(self.rates(ends, batch)[:done]) else None

    @property
    def total(self) -> int:
        return self.warmup + self.windows * self.window


def _split_cpu(logical_cpus: int) -> None:
    """CPU-only tests of multi-replica code: the CPU as `logical_cpus` devices."""
    if logical_cpus > 1:
        tf = import_tensorflow()
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * logical_cpus
        )


def run(request: TrialRequest) -> dict[str, Any]:
    """One trial of a workload: configure, build, compile, and a timed `fit`."""
    import keras

    from tfaccel.optimize import Settings, configure
    from tfaccel.workloads import load_workload

    settings = Settings(**request.settings)
    xla_cache.prepare(settings.effective_xla_options)
    plan = Plan.of(request.steps, settings.steps_per_execution)
    engine = request.engine
    logical_cpus = int(engine.get("logical_cpus", 0))
    _split_cpu(logical_cpus)
    report = configure(settings)
    keras.utils.set_random_seed(request.seed)
    replicas = logical_cpus if logical_cpus > 1 else report.gpus
    mirrored = settings.strategy == "mirrored" or (settings.strategy == "auto" and replicas > 1)
    if mirrored and engine.get("engine", "auto") != "fit":
        from tfaccel.trial.parallel import run_custom

        return run_custom(
            engine,
            settings,
            report,
            wl_name=str(request.workload),
            logical_cpus=logical_cpus,
            warmup=plan.warmup,
            windows=plan.windows,
            window=plan.window,
        )
    with report.strategy_scope(), report.remat_scope():
        workload = load_workload(str(request.workload))
        report.compile(workload.model, optimizer=workload.optimizer, loss=workload.loss)
    batch = settings.batch_size or 32
    if request.race:
        return race_workload(workload, report, batch, request)
    dataset = (
        synthetic_batches(workload.model, workload, batch, report)
        if workload.dataset is None
        else rebatched(workload.dataset, batch)
    )
    fit = workload.model.fit
    has_data = workload.dataset is not None
    batches = dataset if request.count_flops else None  # the baseline's decide the offer
    facts = data_facts(workload.model, workload.examples, has_data, batches=batches)
    dataset = report.dataset(dataset, batch=False)  # batched above, at the trial's size
    reading = noise_scale.Reading(workload.model, request.count_flops, facts)
    out = timed_fit(fit, workload.model, dataset, report, plan, batch, request.count_flops)
    out.update(facts)
    out.update(reading.payload(workload.model, workload.dataset, batch))
    return out


def race_workload(
    workload: Any, report: ConfigureReport, batch: int, request: TrialRequest
) -> dict[str, Any]:
    """A race (`trial.race`) of an entry point's model on its own data: a held-out part
    for validation, the rest shuffled each epoch, as fit shuffles arrays."""
    from tfaccel.trial.race import held_out, race_blocker, race_fit, steps_per_epoch

    why = race_blocker(workload.model, workload.dataset is not None)
    if why:
        raise ValueError(f"no race: {why}")
    split = held_out(workload.dataset, workload.examples)
    train = split.train.shuffle(10_000, seed=request.seed)
    dataset = report.dataset(rebatched(train, batch), batch=False)
    steps = steps_per_epoch(split, batch)

    def fit(callbacks: list[Any]) -> Any:
        return workload.model.fit(
            dataset, epochs=10**6, steps_per_epoch=steps, verbose=0, callbacks=callbacks
        )

    return race_fit(fit, workload.model, split, {**(request.race or {}), "batch": batch})


def timed_fit(
    fit: Any,
    model: Any,
    dataset: Any,
    report: ConfigureReport,
    plan: Plan,
    batch: int,
    count_flops: bool = False,
    started: float = STARTED,
) -> dict[str, Any]:
    """`fit(ds, ...)` for `plan`'s steps with a clock callback; the trial's payload
    (`marks_payload`)."""
    _check_precision(model, report)  # a model built before fit: before its time is spent
    with ShimWatch(model) as watch:  # the losses the accuracy guard compares
        marks, plan = _fit_marks(fit, dataset, plan, batch, lambda logs: watch.loss(logs, "train"))
    return marks_payload(model, report, marks, plan, batch, count_flops, started)


Mark = tuple[int, float, float, float]  # last step of an execution, time, loss, seconds since start


def marks_payload(
    model: Any,
    report: ConfigureReport,
    marks: list[Mark],
    plan: Plan,
    batch: int,
    count_flops: bool = False,
    started: float = STARTED,
) -> dict[str, Any]:
    """A trial's payload from its steps' `marks` (`Marks`): throughput per timed
    window, the time to the training and to the first step apart (tracing and XLA
    compilation), the losses, peak memory and the model's layer counts."""
    _check_precision(model, report)  # one built inside fit (subclassed)
    # marks[i] ends step marks[i][0] (the last step of its execution).
    first_end = marks[0][1]
    ends = {step: stamp for step, stamp, _, _ in marks}
    timed = plan.rates(ends, batch)
    steady = (marks[-1][1] - ends.get(plan.warmup - 1, first_end)) / max(
        1, plan.total - plan.warmup
    )
    start = marks[0][1] - marks[0][3]
    return {
        "setup_s": round(start - started, 3),
        **_model_facts(model, report, count_flops),
        "status": "ok",
        "precision": report.precision,
        "compile_s": max(0.0, first_end - start - steady * plan.spe),
        "window_samples_per_s": timed,
        "peak_memory_bytes": gpu_peak(report),
        "losses": [loss for _, _, loss, _ in marks[:20]],
        "final_loss": marks[-1][2],
        "steps": plan.total,
        "window": plan.window,
        "device": "GPU" if report.gpus else "CPU",
        "jit_compile": bool(getattr(model, "jit_compile", False)),
        "eager": runs_eagerly(model),
        "determinism": op_determinism(model),
        **checkpointing(report),
    }


class Marks:
    """The end of each execution of a trial's steps, as they end: its marks, and the
    plan, its window shortened where the warm-up was slow and its windows cut where
    they settled early (Plan.settled_after)."""

    def __init__(self, plan: Plan, batch: int, start: float | None = None) -> None:
        self.plan, self.batch = plan, batch
        self.start = time.perf_counter() if start is None else start
        self.marks: list[Mark] = []
        self.ends: dict[int, float] = {}

    def mark(self, step: int, loss: float) -> bool:
        """Step `step` (the last of its execution) ended with `loss`: True where the
        plan's steps are all done."""
        now = time.perf_counter()
        self.marks.append((step, now, loss, now - self.start))
        self.ends[step] = now
        plan = self.plan
        if step == plan.warmup - 1 and plan.window_s:
            step_s = warmup_step_s([mark[:3] for mark in self.marks])
            if step_s:
                window = shrink_window(plan.window, plan.spe, step_s, plan.window_s)
                self.plan = dataclasses.replace(plan, window=window)
        settled = self.plan.settled_after(step, self.ends, self.batch)
        if settled is not None:
            self.plan = dataclasses.replace(self.plan, windows=settled)
        return step + 1 >= self.plan.total


def _fit_marks(
    fit: Any,
    dataset: Any,
    plan: Plan,
    batch: int,
    read: Callable[[Any], float] = logged_loss,
    phase: str = "train",
) -> tuple[list[Mark], Plan]:
    """Run `fit` (`phase` "test": `evaluate`) and mark each execution's end (`Marks`):
    the marks, with the loss as `read` finds it in the logs, and the plan."""
    import keras

    marks = Marks(plan, batch)

    def batch_end(self: Any, batch_index: int, logs: Any = None) -> None:
        # (Keras made the logs floats: the step ended)
        if marks.mark(batch_index, read(logs)):
            setattr(self.model, "stop_training" if phase == "train" else "stop_evaluating", True)

    clock = type("Clock", (keras.callbacks.Callback,), {f"on_{phase}_batch_end": batch_end})()
    if phase == "train":
        fit(dataset, epochs=1, steps_per_epoch=plan.total, verbose=0, callbacks=[clock])
    else:
        fit(dataset, steps=plan.total, verbose=0, callbacks=[clock])
    if not marks.marks:
        raise RuntimeError(f"no {'training' if phase == 'train' else 'evaluation'} step completed")
    return marks.marks, marks.plan


def timed_evaluate(model: Any, dataset: Any, plan: Plan, batch: int) -> list[float]:
    """Samples/s of each timed window of `model.evaluate` on `dataset` (batches of
    `batch`, endless), on `plan`'s steps: its warm-up traces and compiles."""
    marks, plan = _fit_marks(model.evaluate, dataset, plan, batch, phase="test")
    return plan.rates({step: stamp for step, stamp, _, _ in marks}, batch)


def _model_facts(model: Any, report: ConfigureReport, count_flops: bool) -> dict[str, Any]:
    """What a trial reports of the model: its layer counts, FLOPs (on request), whether
    it takes float inputs, the layers in float8 and the attention calls cuDNN ran."""
    from tfaccel.optimize.attention import cudnn_calls
    from tfaccel.workloads.inputs import takes_floats

    settings = report.settings
    from tfaccel.optimize.lr_scaling import optimizer_facts

    flops, gemm_share = _flops(model) if count_flops else (None, None)
    return {
        **optimizer_facts(model),
        "forward_flops_per_sample": flops,
        "gemm_flop_share": gemm_share,
        "float_inputs": takes_floats(model),
        **_layer_counts(model),
        **({"float8_layers": len(report.float8_layers)} if settings.float8 else {}),
        **({"cudnn_attention_calls": cudnn_calls()} if settings.attention == "cudnn" else {}),
    }


def _check_precision(model: Any, report: ConfigureReport) -> None:
    """The trial fails where it would not train as its label says."""
    missed = precision_problem(model, report.precision)
    if missed:
        raise ValueError(missed)


def precision_problem(model: Any, precision: str) -> str | None:
    """Why the model would not train in `precision` as it should: the policy did not
    reach it (it would time float32 under a 16-bit label), or its own train_step does
    not scale the loss that mixed_float16 needs scaled."""
    return unapplied_precision(model, precision) or unscaled_loss(model, precision)


def unscaled_loss(model: Any, precision: str) -> str | None:
    """Under mixed_float16, Keras wraps the optimizer in a LossScaleOptimizer, which
    divides the gradients it gets by the loss scale: Keras' own train_step scales the
    loss first (`optimizer.scale_loss`); a model's own train_step (a GAN's, a VAE's, as
    Keras' examples write them) that does not learns from gradients 2**15 times too
    small, and nothing fails. None where the step is Keras' own, where its source scales
    the loss or calls Keras' (`super().train_step`), or where it cannot be read."""
    from tfaccel.trial.race import own_step

    owner = own_step(model, "train_step") if precision == "mixed_float16" else None
    if owner is None:
        return None
    try:
        source = inspect.getsource(vars(owner)["train_step"])
    except (OSError, TypeError):
        return None
    if "scale_loss" in source or "super(" in source:
        return None
    return (
        f"{owner.__name__}.train_step does not scale its loss for mixed_float16 "
        "(loss = self.optimizer.scale_loss(loss), before the gradients), and Keras' "
        "LossScaleOptimizer divides the gradients by the loss scale (32768 at first): it "
        "would learn from gradients that much too small. Scale the loss there, or train "
        "in mixed_bfloat16 (no loss scaling; GPUs of compute capability 8.0 and newer)"
    )


def unapplied_precision(model: Any, precision: str) -> str | None:
    """Why a 16-bit policy did not reach the model, where none of its layers with
    weights computes in 16 bits: layers keep the dtype policy they were built or saved
    with (a model from `keras.models.load_model`, layers given `dtype="float32"`), and
    the global policy reaches only layers built after it. None where it did, or where
    the model cannot tell (not built yet)."""
    if not precision.startswith("mixed_"):
        return None
    try:
        layers = [x for x in model._flatten_layers(include_self=False) if x.weights]
    except Exception:
        return None
    if not layers or any(str(x.compute_dtype) in ("float16", "bfloat16") for x in layers):
        return None
    return (
        f"{precision} not applied: every layer of the model computes in "
        f"{layers[0].compute_dtype} (layers keep the dtype policy they were built or saved "
        "with: a model from keras.models.load_model, or a clone of it, keeps the saved "
        "one; a model built in code after the policy is set takes it)"
    )


def runs_eagerly(model: Any) -> str | None:
    """What makes `model` run each step as Python, outside tf.function, in the
    script's words (compiled with `run_eagerly=True`, or under
    `tf.config.run_functions_eagerly(True)`), or None: Keras then traces no graph and
    turns XLA off."""
    tf = import_tensorflow()
    if getattr(model, "run_eagerly", False):
        return "compile(run_eagerly=True)"
    if tf.config.functions_run_eagerly():
        return "tf.config.run_functions_eagerly(True)"
    return None


def op_determinism(model: Any) -> str | None:
    """What turned on TensorFlow's op determinism, in words for a sentence, where Keras
    then compiles `model` without XLA (its `model_supports_jit`, since Keras 3.7:
    "not all ops are supported by XLA with determinism enabled"), or None."""
    import_tensorflow()
    if not tf_internal("python.framework.config").is_op_determinism_enabled():
        return None
    try:
        from keras.src.trainers.trainer import model_supports_jit

        if model_supports_jit(model):
            return None  # a Keras that compiles it with XLA all the same
    except (ImportError, AttributeError):
        pass
    if os.environ.get("TF_DETERMINISTIC_OPS", "").lower() in ("1", "true"):
        return "TF_DETERMINISTIC_OPS in the environment"
    return "the script's tf.config.experimental.enable_op_determinism()"


def unapplied_notes(model: Any, report: ConfigureReport) -> list[str]:
    """What `run` says of settings the model does not train with: a precision that did
    not reach it, steps the script runs eagerly, XLA that Keras withheld."""
    notes = list(filter(None, [precision_problem(model, report.precision)]))
    eager = runs_eagerly(model)
    if eager:
        notes.append(
            f"its steps run eagerly, as the script's {eager} says: as Python, without "
            "tf.function or XLA, whatever the settings say (tfaccel tune measures graph "
            "mode beside it)"
        )
    xla = report.settings.xla
    withheld = xla_withheld(model, xla == "jit") if xla != "off" and not eager else None
    return notes + ([f"XLA not applied: {withheld}"] if withheld else [])


def xla_withheld(model: Any, jit: bool = True) -> str | None:
    """Why Keras compiled `model` without the XLA that settings asked for, in words for
    a sentence, or None: op determinism (`op_determinism`), whatever XLA setting asked;
    where compile's `jit_compile=True` did (`jit`), layers Keras compiles no model with
    XLA for (`no_xla_layers`: the cuDNN LSTM and GRU, lookups), else what Keras' own
    `model_supports_jit` said (an Apple GPU)."""
    determinism = op_determinism(model)
    if determinism:
        return determinism_withholds_xla(determinism)
    if not jit or getattr(model, "jit_compile", None) is not False:
        return None
    try:
        layers = no_xla_layers(list(model._flatten_layers(include_self=False, recursive=True)))
    except Exception:
        layers = {}
    if layers:
        return (
            f"Keras compiles no model with XLA that holds these layers: {layers_in_words(layers)}"
        )
    return "Keras compiled the model without it (its jit_compile is False)"


def _layer_counts(model: Any) -> dict[str, Any]:
    """For each knob whose late trial needs its layers (LAYER_KNOBS), how many the
    model holds, nested ones (a MultiHeadAttention's dropout and projections, KerasHub's
    attention subclasses) included, as `<knob>_layers`; the attention layers with
    dropout, the layer norms (for cuDNN's, an XLA option) and the layers without XLA
    (`no_xla_layers`). None each if the model cannot say."""
    import keras

    from tfaccel.optimize import attention
    from tfaccel.optimize.patches import LAYER_COUNTERS

    names = [f"{knob}_layers" for knob in LAYER_KNOBS]
    names += ["attention_dropout_layers", "layer_norm_layers", "no_xla_layers"]
    try:
        layers = list(model._flatten_layers(include_self=False, recursive=True))
    except Exception:
        return dict.fromkeys(names)
    counts: dict[str, Any] = {
        f"{knob}_layers": LAYER_COUNTERS[knob](layers) for knob in LAYER_KNOBS
    }
    counts["attention_dropout_layers"] = attention.count_dropping_layers(layers)
    norms = [x for x in layers if isinstance(x, keras.layers.LayerNormalization)]
    counts["layer_norm_layers"] = len(norms)
    counts["no_xla_layers"] = no_xla_layers(layers)
    return counts


def no_xla_layers(layers: list[Any]) -> dict[str, int]:
    """The layers among `layers` that Keras marks `supports_jit = False`, by class:
    Keras compiles no model holding one with XLA (`jit_compile` True or "auto" falls
    back to False). On TensorFlow these are the LSTM and GRU layers that run on cuDNN
    (its RNN ops have no XLA kernel), lookup, hashing and random-augmentation layers."""
    found = collections.Counter(
        type(layer).__name__ for layer in layers if not getattr(layer, "supports_jit", True)
    )
    return dict(sorted(found.items()))


def _flops(model: Any) -> tuple[int | None, float | None]:
    """(Forward product FLOPs per sample, the matrix products' share of them)
    (tfaccel.workloads.flops), or (None, the share over its sub-models') where the model
    has no forward pass to trace (a GAN's)."""
    from tfaccel.workloads.flops import forward_flops, sub_models_gemm_share

    try:
        return forward_flops(model)
    except Exception:
        pass
    try:
        return None, sub_models_gemm_share(model)
    except Exception:
        return None, None


def warmup_step_s(marks: list[tuple[int, float, float]]) -> float | None:
    """Seconds per step in the warm-up after its first execution (which compiles), from
    the (last step, time, loss) marks so far; None with fewer than two later marks."""
    if len(marks) < 3:
        return None
    (first_step, first_time, _), (last_step, last_time, _) = marks[1], marks[-1]
    return (
        (last_time - first_time) / (last_step - first_step)
        if last_step > first_step and last_time > first_time
        else None
    )


def shrink_window(window: int, spe: int, step_s: float, window_s: float) -> int:
    """Steps per timed window: `window`, or fewer (whole executions, at least one) when
    `window` steps of `step_s` would take longer than `window_s`."""
    if step_s * window <= window_s:
        return window
    executions = max(1, math.ceil(window_s / step_s / spe))
    return min(window, executions * spe)


def main(argv: list[str]) -> int:
    try:
        out = run(TrialRequest.from_json(argv[0]))
    except Exception as exc:
        out = failure(exc)
    emit(MARK, out)
    return 0


if __name__ == "__main__":
    main(sys.argv[1:])
    end_process()
