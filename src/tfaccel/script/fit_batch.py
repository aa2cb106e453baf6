"""The batch a script's fit trains at under `tfaccel run`, and the form of its data:
the script's own batch as its fit call gives it, or an applied batch offer's, which
holds only for the batch its race started from (`script.hook` applies them)."""

from __future__ import annotations

import sys
from typing import Any

from tfaccel.trial.protocol import TrialRequest, fit_call_parts


def own_batch_note(dataset: Any, model: Any) -> str:
    size = own_batch_of({"x": dataset}, model)
    return f"batch {size} (the script's own)" if size else "batch as the script's"


def own_batch_of(fit_args: dict[str, Any], model: Any) -> int | None:
    """The batch fit trains at as the script calls it: arrays at fit's batch_size (Keras'
    32 without one), a dataset at its `.batch(n)` where that says it without a batch
    being read (`workloads.inputs`); None where neither tells."""
    x = fit_args.get("x")
    if is_array(x):
        return int(fit_args.get("batch_size") or 32)
    if not is_dataset(x):
        return None
    from tfaccel.workloads.inputs import user_data

    try:
        return user_data(x, model).batch_size
    except Exception:  # a dataset tfaccel cannot take apart still trains as it is
        return None


def offer_for(
    fit_args: dict[str, Any], model: Any, size: int | None, request: TrialRequest, call: str
) -> tuple[int | None, dict[str, Any] | None, list[str]]:
    """The batch and learning-rate change for this fit, and what to say: an applied
    batch offer holds for the batch its race started from; a fit that trains at another
    (the script run with other options than the tune's) keeps its own batch and rate.
    The same-training answer keeps the fit's own batch anyway; where that is not the
    one its settings were measured at, that is said. `call`: which fit this is
    (`protocol.fit_call`)."""
    measured = request.from_batch
    own = own_batch_of(fit_args, model) if measured else None
    if own is None or own == measured:
        why = not_raced(model, call, request.raced_fit) if request.lr else None
        return (None, None, [why]) if why else (size, request.lr, [])
    if not request.lr:
        note = (
            f"tfaccel.json's settings were measured at batch {measured}, this fit trains at "
            f"{own} (tune this command for settings measured at {own})"
        )
        return size, None, [note]
    why = (
        f"batch offer not applied to this fit: its race started from batch {measured}, "
        f"and this fit trains at {own} (tune this command for an offer from {own})"
    )
    return None, None, [why]


# The optimizer whose learning rate `run` scaled for an applied batch offer, at the
# first fit that took it. A later fit that trains on with it (a loop of fits) takes the
# offer too; a fit whose model was compiled again (a new optimizer: fine-tuning after a
# frozen phase) or another model's fit was not raced, and keeps its own batch and rate.
_SCALED: list[Any] = []


def scaled_first(model: Any) -> bool:
    """Is this the first fit to take the offer (its learning rate to scale)? The
    optimizer it trains is noted: later fits take the offer only with it."""
    if _SCALED:
        return False
    _SCALED.append(getattr(model, "optimizer", None))
    return True


def not_raced(model: Any, call: str, raced_fit: str | None) -> str | None:
    """Why an applied batch offer does not hold for the fit `call` (`protocol.fit_call`),
    or None: a fit called elsewhere than the one it was raced on (`raced_fit`, where
    the file says), or there before it (a helper's fit called for two phases, tune
    --fit 2), or another optimizer than the one the first fit to take it trains."""
    where, nth = fit_call_parts(call)
    raced_where, raced_nth = fit_call_parts(raced_fit or call)
    if where != raced_where or nth < raced_nth:
        return (
            f"batch offer not applied to this fit: its race ran the fit at {raced_fit} "
            "(tune --fit N races the N-th): its own batch and learning rate kept"
        )
    if not _SCALED or getattr(model, "optimizer", None) is _SCALED[0]:
        return None
    return (
        "batch offer not applied to this fit: it trains another optimizer than the fit "
        "that took it (the model compiled again, or another model), which its race did "
        "not train: its own batch and learning rate kept"
    )


def same_examples_per_epoch(
    fit_args: dict[str, Any], own: int | None, size: int, notes: list[str]
) -> None:
    """steps_per_epoch counts batches: at another batch size it is scaled so that an
    epoch holds the examples it held in the script (else a larger batch would make
    each epoch, and the run, that many times longer)."""
    steps = fit_args.get("steps_per_epoch")
    if not steps or not own or own == size:
        return
    scaled = max(1, -(-steps * own // size))
    fit_args["steps_per_epoch"] = scaled
    notes.append(f"steps_per_epoch {steps} -> {scaled} (the examples of an epoch kept)")


def data_form(x: Any) -> str:
    """What the script gives fit: a tf.data "dataset", numpy "arrays" (which `run`
    passes to fit as they are: no tf.data setting reaches them), or an "iterator"."""
    return "dataset" if is_dataset(x) else "arrays" if is_array(x) else "iterator"


def is_dataset(x: Any) -> bool:
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(x, tf.data.Dataset)


def is_array(x: Any) -> bool:
    return hasattr(x, "shape") or isinstance(x, (list, tuple, dict))
