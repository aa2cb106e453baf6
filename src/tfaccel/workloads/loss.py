"""A workload's loss as per-example values, for one output or several.

Keras' `fit` applies a model's loss itself (one loss for every output, or a list or dict
of them). tfaccel's own steps (the memory plan's traced step, scale's data-parallel
step) call the loss directly, so they go through `per_example_loss`: for one output it
is the loss with no reduction (per-example values, as before); for several, each
output's loss summed over its elements, added up over the outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _unreduced(loss: Any) -> Any:
    """A Keras loss (name or object) that returns per-example values; a plain function
    already does; its labels and predictions are first matched in rank as `compile`'s
    wrapper matches them (a (n,) label against a (n, 1) sigmoid)."""
    import keras

    base = keras.losses.get(loss) if isinstance(loss, str) else loss
    if isinstance(base, keras.losses.Loss):
        config = base.get_config()
        config["reduction"] = None
        return type(base).from_config(config)
    if callable(base):
        return lambda y, pred: base(*_same_rank(y, pred))
    return base


def _same_rank(y: Any, pred: Any) -> tuple[Any, Any]:
    """Labels and predictions whose ranks differ by one, the larger's last dimension 1,
    matched as Keras' loss wrapper matches them: a rank-1 one gains that dimension,
    else the larger loses it."""
    if len(y.shape) + 1 == len(pred.shape) and pred.shape[-1] == 1:
        return (_expand(y), pred) if len(y.shape) == 1 else (y, _squeeze(pred))
    if len(pred.shape) + 1 == len(y.shape) and y.shape[-1] == 1:
        return (y, _expand(pred)) if len(pred.shape) == 1 else (_squeeze(y), pred)
    return y, pred


def _expand(x: Any) -> Any:
    import keras

    return keras.ops.expand_dims(x, -1)


def _squeeze(x: Any) -> Any:
    import keras

    return keras.ops.squeeze(x, -1)


def per_example_loss(loss: Any) -> Callable[[Any, Any], Any]:
    """loss(y, pred) without reduction. With several outputs (pred a list, tuple or
    dict), `loss` is one loss for all of them, or a list / dict of one per output, and
    the result is the sum over the outputs of each one's summed values."""
    import keras

    if isinstance(loss, dict):
        fns: Any = {name: _unreduced(output_loss) for name, output_loss in loss.items()}
    elif isinstance(loss, (list, tuple)):
        fns = [_unreduced(output_loss) for output_loss in loss]
    else:
        fns = _unreduced(loss)

    def total(pairs: list[tuple[Any, Any, Any]]) -> Any:
        ops = keras.ops
        return sum(ops.sum(ops.cast(loss_fn(y, pred), "float32")) for loss_fn, y, pred in pairs)

    def call(y: Any, pred: Any) -> Any:
        if isinstance(pred, dict):
            pick = (lambda name: fns[name]) if isinstance(fns, dict) else (lambda name: fns)
            return total([(pick(name), y[name], pred[name]) for name in pred])
        if isinstance(pred, (list, tuple)):
            pick_i = (lambda i: fns[i]) if isinstance(fns, list) else (lambda i: fns)
            return total([(pick_i(i), y[i], output) for i, output in enumerate(pred)])
        return fns(y, pred)

    return call
