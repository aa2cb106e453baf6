"""A race: the user's model trained for a fixed time, its validation loss read at intervals.

`tune` races the same-training answer against a batch offer (`tfaccel.tune.offer`):
each run starts from the same initial weights (the trial's seed), trains on the same
examples for the same training time, and evaluates the same validation set every
`every_s` seconds of training. Evaluation time is left out of the clock, and so is the
first execution (tracing and compilation, paid once by a training of hours, but a
large share of a race of a minute); everything else of training is in. The payload
carries the curve of (seconds of training, validation loss).

The validation set is the script's own (`validation_data`, or the `validation_split`
Keras would take: the last part of its arrays), else a held-out part of its training
data that is never trained on. A model with a `train_step` of its own and no
`test_step` (a GAN, a VAE) has no validation loss to compare: no race.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from tfaccel.trial.shared import logged_loss, loss_key

# The held-out part where the script has no validation data: a tenth of the examples,
# within these bounds (their count unknown: HELD_OUT_UNKNOWN).
HELD_OUT_MIN, HELD_OUT_MAX, HELD_OUT_UNKNOWN = 32, 5000, 1024
# Validation batches are this size in both runs, whatever the batch under test.
EVAL_BATCH = 256
# A race reads its validation loss on at most this many examples, the first of the
# validation set, the same ones in both runs: each evaluation is off the race's clock
# but not off the tune's budget, and thirteen evaluations of a script's whole
# validation set made a race run outlast its --race seconds by much (the measurements
# page). The held-out part is no larger.
VALIDATION_MAX = HELD_OUT_MAX
# Points on each curve: the race's time over this is the evaluation interval.
POINTS = 12
# The training callbacks a race keeps: they change the learning rate, not the user's
# files; every other callback of the script (checkpoints, logs) is left out.
KEPT_CALLBACKS = ("LearningRateScheduler", "ReduceLROnPlateau")


def own_step(model: Any, name: str) -> type | None:
    """The class of the model's that defines its `name` step ("train_step",
    "test_step"), where that is not Keras' own; None where Keras' runs."""
    owner = next((klass for klass in type(model).__mro__ if name in vars(klass)), None)
    if owner is None or owner.__module__.split(".")[0] == "keras":
        return None
    return owner


def own_train_step_only(model: Any) -> type | None:
    """The class of the model's whose train_step is its own where Keras' test_step runs
    (a GAN's, a VAE's, keras-io's trainer pattern); None otherwise."""
    if own_step(model, "test_step") is not None:
        return None
    return own_step(model, "train_step")


# Keras 3 keeps Keras 2's `model.compiled_metrics.update_state` as a shim that updates
# every Mean metric of the model with the predictions, Keras' own loss tracker among
# them: a Keras 2 step that calls it reports as "loss" the mean of its predictions
# (keras-io's knowledge distillation example does; its "student_loss" is the loss).
SHIM_ONLY = (
    "its test_step reports as 'loss' Keras' loss tracker, which the deprecated "
    "compiled_metrics.update_state it calls fills with the mean of the predictions, and "
    "no other loss: evaluate() gives no loss comparable across batch sizes (return the "
    "loss under a name of its own, e.g. 'val_loss' from a Mean metric)"
)


class ShimWatch:
    """While entered, which of the model's steps ("train", "test": `phase` when it is
    traced) called Keras 3's compiled_metrics shim, so that a "loss" entry that is the
    shim's (`loss`) is left out. Each step function is traced anew inside.

    A step of Keras 2's pattern that gets its loss from Keras 3's `compiled_loss` shim
    too (keras-io's trainer pattern) reports that loss as "loss" here: the shim's value
    goes to Keras' loss tracker, and compiled_metrics updates the other metrics only.
    Keras 3 itself reports the mean of the predictions there (0.1 at every step of a
    ten-class softmax), which held the accuracy guard to nothing."""

    def __init__(self, model: Any) -> None:
        self.model, self.phase, self.fed = model, "train", set[str]()
        self.tracked = set[str]()  # the phases whose compiled_loss fed the loss tracker
        self.read: Any = None  # the entry of the last evaluation's read where not "loss"

    def __enter__(self) -> ShimWatch:
        original = getattr(self.model, "_compiled_metrics_update_state", None)
        if original is not None:

            def watched(*args: Any, **kwargs: Any) -> Any:
                if self.phase in self.tracked:
                    return self._without_tracker(original, *args, **kwargs)
                self.fed.add(self.phase)
                return original(*args, **kwargs)

            object.__setattr__(self.model, "_compiled_metrics_update_state", watched)
        loss = getattr(self.model, "compiled_loss", None)
        if callable(loss) and getattr(self.model, "_loss_tracker", None) is not None:

            def tracked(*args: Any, **kwargs: Any) -> Any:
                value = loss(*args, **kwargs)
                self.model._loss_tracker.update_state(value)
                self.tracked.add(self.phase)
                return value

            object.__setattr__(self.model, "compiled_loss", tracked)
        self.model.train_function = self.model.test_function = None
        return self

    def __exit__(self, *exc: object) -> None:
        vars(self.model).pop("_compiled_metrics_update_state", None)
        vars(self.model).pop("compiled_loss", None)

    def _without_tracker(self, update: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """The shim's update of every metric but Keras' loss tracker."""
        tracker = self.model._loss_tracker
        object.__setattr__(self.model, "_loss_tracker", None)
        try:
            return update(*args, **kwargs)
        finally:
            object.__setattr__(self.model, "_loss_tracker", tracker)

    def loss(self, logs: Any, phase: str) -> float:
        """The loss of a `phase` step's logs: `shared.logged_loss`, without a "loss"
        entry that is Keras' loss tracker where the shim fed it."""
        keras_loss = not (phase in self.fed and self._tracker(logs))
        if phase == "test" and not keras_loss:
            self.read = loss_key(logs, keras_loss)
        return logged_loss(logs, keras_loss)

    def note(self) -> str:
        """What to add to the validation's description where its loss is not "loss"."""
        if self.read is None:
            return ""
        return (
            f"; its loss read from '{self.read}' (the 'loss' its test_step reports is Keras' "
            "loss tracker, filled by the deprecated compiled_metrics with the predictions)"
        )

    def _tracker(self, logs: Any) -> bool:
        tracker = getattr(self.model, "_loss_tracker", None)
        if tracker is None or "loss" not in (logs or {}):
            return False
        try:
            return math.isclose(float(logs["loss"]), float(tracker.result()), rel_tol=1e-6)
        except (TypeError, ValueError):
            return False


def evaluation_blocker(model: Any, batches: Any) -> str | None:
    """Why evaluating one of `batches` gives no loss to race by, or None: SHIM_ONLY where
    the model's own test_step reports no loss but the shim's; where the model trains by
    a train_step of its own, why Keras' test_step cannot evaluate the loss it was
    compiled with on its data (its batches need not be what `model(x)` takes)."""
    owner, own_test = own_train_step_only(model), own_step(model, "test_step")
    if own_test is None and owner is None:
        return None
    with ShimWatch(model) as watch:
        watch.phase = "test"
        try:
            result = model.evaluate(batches.take(1), verbose=0, return_dict=True)
        except Exception as exc:
            if own_test is not None:
                raise
            return (
                f"Keras' test_step cannot evaluate the loss {getattr(owner, '__name__', '?')} "
                f"was compiled with on its data ({type(exc).__name__}: {str(exc)[:200]})"
            )
        if not math.isnan(watch.loss(result, "test")):
            return None
        return SHIM_ONLY if own_test is not None else "evaluate() gives no loss on its data"


def no_race(model: Any) -> str | None:
    """Why the model has no validation loss to race by, or None. A train_step of the
    model's own with Keras' test_step is raced where the model was compiled with a loss
    (keras-io's trainer pattern): Keras' test_step evaluates that loss."""
    owner = own_train_step_only(model)
    if owner is None or getattr(model, "_compile_loss", None) is not None:
        return None
    return (
        f"{owner.__name__} has a train_step of its own and no test_step, and was compiled "
        "with no loss, so evaluate() gives no loss comparable across batch sizes (a GAN's "
        "or a VAE's)"
    )


def compiled_loss_note(model: Any) -> str:
    """What to add to the validation's description where Keras' test_step reads the
    compiled loss of a model that trains by a train_step of its own."""
    owner = own_train_step_only(model)
    if owner is None:
        return ""
    return f"; its loss is the one {owner.__name__} was compiled with (Keras' test_step)"


SYNTHETIC = (
    "its data is synthetic (a built-in, or an entry point without a dataset): there is "
    "no training data to judge what a batch change does to the training by"
)


def race_blocker(model: Any, has_data: bool) -> str | None:
    """Why no race can judge this model on this data, or None."""
    return no_race(model) or (None if has_data else SYNTHETIC)


def data_facts(
    model: Any, examples: int | None, has_data: bool, batches: Any = None
) -> dict[str, Any]:
    """What a trial reports for the batch offer: how many examples the data holds
    (where it says), and whether a race can judge the model (`no_race`: why not; with
    `batches` of its data, also `evaluation_blocker`'s reason)."""
    why = race_blocker(model, has_data)
    if why is None and has_data and batches is not None:
        why = evaluation_blocker(model, batches)
    return {**({"examples": examples} if examples else {}), **({"no_race": why} if why else {})}


class Split(NamedTuple):
    """Training and validation examples, where the validation comes from (in words),
    and how many training examples there are (None: unknown)."""

    train: Any
    validation: Any
    what: str
    train_count: int | None


def held_out(examples: Any, count: int | None) -> Split:
    """A tenth of the examples, from the start of the stream, never trained on."""
    size = min(HELD_OUT_MAX, max(HELD_OUT_MIN, count // 10)) if count else HELD_OUT_UNKNOWN
    what = f"a held-out {size:,} examples of the training data, never trained on"
    rest = count - size if count and count > size else None
    return Split(examples.skip(size), examples.take(size).cache(), what, rest)


def split_off(examples: Any, count: int | None, fraction: float) -> Split:
    """The last `fraction` of the examples for validation, as Keras' `validation_split`
    takes it from arrays."""
    if not count:
        return held_out(examples, count)
    size = max(1, int(count * fraction))
    what = f"the script's validation_split={fraction:g} (the last {size:,} examples)"
    what += read_note(size)
    return Split(
        examples.take(count - size), examples.skip(count - size).cache(), what, count - size
    )


def read_note(count: int | None) -> str:
    """What to add to the validation's description where the race reads only its first
    VALIDATION_MAX examples (`count` None: unknown, maybe more)."""
    if count is not None and count <= VALIDATION_MAX:
        return ""
    return f"; the race reads its first {VALIDATION_MAX:,}"


def steps_per_epoch(split: Split, batch: int) -> int:
    """An epoch's steps in a race: the training examples over the batch (100 where
    their count is unknown: epochs only pace the script's learning-rate callbacks)."""
    return max(1, split.train_count // batch) if split.train_count else 100


def kept_callbacks(callbacks: Any) -> list[Any]:
    """The script's callbacks that change the learning rate (KEPT_CALLBACKS)."""
    found = callbacks if isinstance(callbacks, (list, tuple)) else []
    return [callback for callback in found if type(callback).__name__ in KEPT_CALLBACKS]


def lr_setters(callbacks: Any) -> tuple[str, ...]:
    """The class names of `kept_callbacks`, as a batch offer names them."""
    return tuple(type(callback).__name__ for callback in kept_callbacks(callbacks))


def race_fit(
    fit: Callable[..., Any], model: Any, split: Split, race: dict[str, Any]
) -> dict[str, Any]:
    """Call `fit(callbacks=[...])` (the caller binds the data, batch size and epochs)
    until `race["seconds"]` of training have passed; the payload with the curve and
    what the validation was. `split.validation`: a dataset of single examples;
    `race["batch"]`: the batch size trained at; `race["lr"]`: a learning-rate change
    (`tfaccel.optimize.lr_scaling.LrChange` as a dict) to apply, or None."""
    import keras

    from tfaccel.optimize.lr_scaling import apply, from_dict, value_of

    seconds = float(race["seconds"])
    val = split.validation.take(VALIDATION_MAX).batch(EVAL_BATCH)
    extra: list[Any] = []
    note = None
    if race.get("lr"):
        warmup, note = apply(model, from_dict(race["lr"]))
        extra = [warmup] if warmup is not None else []
    with ShimWatch(model) as watch:
        clock = _RaceClock(keras, val, watch, seconds)
        fit(callbacks=[*extra, clock])
    steps = int(value_of(model.optimizer.iterations))
    samples = steps * int(race["batch"])
    return {
        "status": "ok",
        "race": clock.curve,
        "race_steps": steps,
        "window_samples_per_s": [samples / clock.trained_s] if samples and clock.trained_s else [],
        "final_loss": clock.curve[-1][1] if clock.curve else None,
        "validation": split.what + compiled_loss_note(model) + watch.note(),
        **({"lr_applied": note} if note else {}),
    }


@contextlib.contextmanager
def _metrics_kept(model: Any) -> Iterator[None]:
    """The model's metrics (Keras' loss tracker among them) as they were before the
    block: `evaluate` resets them and leaves its own means there, which the training
    steps after it, until the epoch ends, would average into the training loss they
    log (a race evaluating inside an epoch read its validation loss into its training
    curve)."""
    import numpy as np

    kept = [(v, np.array(v)) for metric in model.metrics for v in metric.variables]
    try:
        yield
    finally:
        for variable, value in kept:
            variable.assign(value)


class _RaceClock:
    """A Keras callback (built on first use: Keras is imported in the child only) that
    evaluates at the start and every `seconds / POINTS` seconds of training, the clock
    started at the end of the first execution, and stops the fit after `seconds`. Each
    point: [seconds, validation loss, training loss (Keras' mean over the epoch so far;
    None at the start)], each read as `watch` says."""

    def __new__(cls, keras: Any, val: Any, watch: ShimWatch, seconds: float) -> Any:
        every_s = seconds / POINTS

        class RaceClock(keras.callbacks.Callback):
            def __init__(self) -> None:
                super().__init__()
                self.curve: list[list[float | None]] = []
                self.paused = 0.0
                self.start = 0.0
                self.next = every_s
                self.trained_s = 0.0
                self.compiled = False
                self.train_loss: float | None = None  # none before the first step

            def on_train_begin(self, logs: Any = None) -> None:
                self.start = time.perf_counter()
                self._point(0.0)

            def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
                # waits for the step to finish; Keras' mean over the epoch so far
                self.train_loss = watch.loss(logs, "train")
                if not self.compiled:  # the first execution: tracing and compilation
                    self.compiled = True
                    self.start, self.paused = time.perf_counter(), 0.0
                elapsed = time.perf_counter() - self.start - self.paused
                self.trained_s = elapsed
                if elapsed >= self.next or elapsed >= seconds:
                    self._point(elapsed)
                    self.next = elapsed + every_s
                if elapsed >= seconds:
                    self.model.stop_training = True

            def _point(self, elapsed: float) -> None:
                began = time.perf_counter()
                watch.phase = "test"  # the test step is traced in the first evaluation
                with _metrics_kept(self.model):
                    result = self.model.evaluate(val, verbose=0, return_dict=True)
                    loss = watch.loss(result, "test")  # reads the tracker evaluate left
                watch.phase = "train"
                self.paused += time.perf_counter() - began
                self.curve.append([round(elapsed, 3), loss, self.train_loss])

        return RaceClock()
