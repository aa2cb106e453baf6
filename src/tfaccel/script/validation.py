"""The script's validation: what a race reads, and what a trial times.

Keras' `fit` evaluates the script's validation data (`validation_data`, or the
`validation_split` of its arrays) after every `validation_freq` epochs, with the
training's compiled settings (XLA, steps_per_execution): the user waits for both, and
a setting can speed one up and slow the other. So a trial of a script that validates
times the evaluation too, on the same
plan of windows as its training, and its figure is samples per second of an epoch
with its validation: each timed training window's rate, with the validation's time
per training example added (`with_validation`). The race reads the same validation
data (a held-out part of the training data where the script has none).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from tfaccel import stats

if TYPE_CHECKING:
    from tfaccel.trial.child import Plan
    from tfaccel.trial.race import Split
    from tfaccel.workloads.inputs import UserData


@dataclass(frozen=True)
class EpochShape:
    """An epoch of the script's fit: training examples, validation examples (every
    `every` epochs), and the batch its validation runs at."""

    train: int
    validation: int
    every: int
    batch: int

    @property
    def ratio(self) -> float:
        """Validation examples per training example, over the epochs between two."""
        return self.validation / (self.train * self.every)


def split(
    model: Any,
    fit_args: dict[str, Any],
    examples: Any,
    count: int | None,
    given: UserData | None = None,
) -> Split:
    """The validation examples: fit's `validation_data` (`given`: as `read_given`
    read it, so that its arrays are not copied twice), its `validation_split` of
    arrays, else a held-out part of the training examples."""
    from tfaccel.trial.race import Split, held_out, read_note, split_off
    from tfaccel.workloads.inputs import count_examples

    found = given or read_given(model, fit_args, peek=False)
    if found is not None:
        data = _packed(fit_args["validation_data"])
        what = "the script's validation_data" + read_note(count_examples(data, found))
        return Split(examples, found.examples, what, count)
    if _split_fraction(fit_args) > 0:
        return split_off(examples, count, _split_fraction(fit_args))
    return held_out(examples, count)


def read_given(model: Any, fit_args: dict[str, Any], peek: bool = True) -> UserData | None:
    """fit's `validation_data` as examples and the size of its batches (with `peek`, a
    dataset of batches is read where its `.batch(n)` does not say), None where it has
    none."""
    from tfaccel.workloads.inputs import user_data

    given = fit_args.get("validation_data")
    return None if given is None else user_data(_packed(given), model, peek=peek)


def epoch_shape(
    model: Any,
    fit_args: dict[str, Any],
    count: int | None,
    batch: int,
    given: UserData | None = None,
) -> EpochShape | str | None:
    """The epoch of the script's fit at `batch` (`count`: its training examples, where
    known; `given`: its `validation_data` as `read_given` read it); a string that says
    why its validation cannot be weighed; None where the fit does not validate."""
    fraction = _split_fraction(fit_args)
    if fit_args.get("validation_data") is None and fraction <= 0:
        return None
    val_batch = int(fit_args.get("validation_batch_size") or batch)
    given = given or read_given(model, fit_args)
    if given is None:
        if not count:
            return "how many examples its arrays hold is unknown"
        held = max(1, int(count * fraction))
        size, count = held, count - held
    else:
        size, val_batch = _given_size(fit_args, given, val_batch)
    steps = fit_args.get("validation_steps")
    if steps:
        size = min(size, int(steps) * val_batch) if size else int(steps) * val_batch
    per_epoch = int(fit_args.get("steps_per_epoch") or 0) * batch or count
    if not size:
        return "how many examples its validation_data holds is unknown (a generator?)"
    if not per_epoch:
        return "how many examples an epoch trains on is unknown (give fit steps_per_epoch)"
    every = max(1, int(fit_args.get("validation_freq") or 1))
    return EpochShape(int(per_epoch), int(size), every, val_batch)


# The batch a script's validation arrays are evaluated at where tune tries a larger
# one: evaluation keeps no activations for a backward pass, so a batch this size needs
# the memory of a few hundred training examples, and Keras' default (the training batch,
# 32 unless the script says) leaves a small model's evaluation launch-bound (keras-io's
# bidirectional LSTM at 32: its validation was 32 % of the epoch on an H200).
LARGE_VALIDATION_BATCH = 1024
NO_VALIDATION = "the fit does not validate"


def batch_blocker(model: Any, fit_args: dict[str, Any]) -> str | None:
    """Why the fit's validation cannot be evaluated at another batch
    (`Settings.validation_batch_size`); None where it can: validation arrays
    (`validation_data` or `validation_split`), a model of no fixed batch."""
    from tfaccel.script.fit_batch import is_array, is_dataset

    given = fit_args.get("validation_data")
    if given is None and _split_fraction(fit_args) <= 0:
        return NO_VALIDATION
    if fit_args.get("validation_batch_size"):
        return f"the script sets validation_batch_size={fit_args['validation_batch_size']}"
    if fit_args.get("validation_steps"):  # batches: another size validates other examples
        return f"the script sets validation_steps={fit_args['validation_steps']} (batches)"
    packed = None if given is None else _packed(given)
    first = packed[0] if isinstance(packed, tuple) else packed
    if given is not None and not is_array(first):
        what = "a tf.data.Dataset" if is_dataset(first) else type(first).__name__
        return f"its validation_data ({what}) makes its own batches"
    return _fixed_batch(model)


def _fixed_batch(model: Any) -> str | None:
    """Why the model runs at one batch size only (a stateful layer carries its state
    from batch to batch; an input of a fixed batch dimension), else None."""
    try:
        layers = model._flatten_layers(include_self=False, recursive=True)
        stateful = [layer.name for layer in layers if getattr(layer, "stateful", False)]
    except Exception:  # a model without Keras' layer tracking
        stateful = []
    if stateful:
        return f"a stateful layer ({stateful[0]}) carries its state from batch to batch"
    try:
        fixed = [t.shape[0] for t in model.inputs if t.shape[0] is not None]
    except Exception:  # a subclassed model not built yet: no inputs of its own
        fixed = []
    return f"its inputs have a fixed batch dimension ({fixed[0]})" if fixed else None


def applied_batch(model: Any, fit_args: dict[str, Any], size: int | None) -> str | None:
    """fit's validation evaluated at `size` (`Settings.validation_batch_size`) where it
    can be (`batch_blocker`), `fit_args` changed; what to say (None: nothing asked, or
    a fit that does not validate)."""
    if not size:
        return None
    why = batch_blocker(model, fit_args)
    if why == NO_VALIDATION:
        return None
    if why:
        return f"validation at the script's own batch ({why})"
    fit_args["validation_batch_size"] = size
    return f"validation_batch_size={size} (evaluation only: the training is the same)"


def timed(call: Any, plan: Plan, payload: dict[str, Any]) -> dict[str, Any]:
    """The trial's payload with the validation of the script's fit `call`
    (`script.hook`'s: its arguments `a`, model, examples, their count and the batch
    trained at) timed on `plan` and folded into its windows (their training-only rates
    kept as `train_window_samples_per_s`), or with why it was not
    (`validation_untimed`). Unchanged where the fit does not validate or the trial
    failed."""
    if payload.get("status") != "ok":
        return payload
    try:
        return _timed(call, plan, payload)
    except Exception as exc:  # the training's figures stand; said why not the validation
        why = f"its evaluation failed ({type(exc).__name__}: {str(exc)[-300:]})"
        return {**payload, "validation_untimed": why}


def _timed(call: Any, plan: Plan, payload: dict[str, Any]) -> dict[str, Any]:
    given = read_given(call.model, call.a)
    shape = epoch_shape(call.model, call.a, call.count, call.batch, given)
    if shape is None:
        return payload
    if isinstance(shape, str):
        return {**payload, "validation_untimed": shape}
    from tfaccel._tf import import_tensorflow
    from tfaccel.trial.child import timed_evaluate
    from tfaccel.workloads.inputs import in_batches

    tf = import_tensorflow()
    val = split(call.model, call.a, call.examples, call.count, given).validation
    batches = in_batches(val.take(shape.validation).repeat(), shape.batch, drop_remainder=True)
    rates = timed_evaluate(call.model, batches.prefetch(tf.data.AUTOTUNE), plan, shape.batch)
    rate = stats.median(rates)
    if not rate:
        return {**payload, "validation_untimed": "no timed window of its evaluation ended"}
    train = payload["window_samples_per_s"]
    folded = [with_validation(each, rate, shape.ratio) for each in train]
    alone, both = stats.median(train), stats.median(folded)
    share = 1.0 - both / alone if alone and both else None
    return {
        **payload,
        "window_samples_per_s": folded,
        "train_window_samples_per_s": train,
        "validation_timing": {**asdict(shape), "samples_per_s": rate, "share": share},
    }


def with_validation(train_rate: float, validation_rate: float, ratio: float) -> float:
    """Training samples per second of an epoch with its validation: `ratio` validation
    examples per training example, evaluated at `validation_rate`."""
    if train_rate <= 0 or validation_rate <= 0:
        return 0.0
    return 1.0 / (1.0 / train_rate + ratio / validation_rate)


def _given_size(fit_args: dict[str, Any], given: UserData, val_batch: int) -> tuple[int, int]:
    """How many examples fit's `validation_data` holds (0: unknown), and the batch it
    is evaluated at: a dataset's own batches, arrays at `val_batch`."""
    from tfaccel.workloads.inputs import count_examples

    data = _packed(fit_args["validation_data"])
    return count_examples(data, given) or 0, given.batch_size or val_batch


def _packed(given: Any) -> Any:
    """fit's `validation_data` as fit packs it: a tuple of arrays as (x, y[, weights])."""
    import keras

    return given if not isinstance(given, tuple) else keras.utils.pack_x_y_sample_weight(*given)


def _split_fraction(fit_args: dict[str, Any]) -> float:
    """fit's validation_split where Keras takes it (arrays), else 0."""
    x = fit_args.get("x")
    array = hasattr(x, "shape") or isinstance(x, (list, tuple, dict))
    value = float(fit_args.get("validation_split") or 0.0)
    return value if array and math.isfinite(value) else 0.0
