"""The gradient noise scale of the user's model, from a few batches of its own data.

McCandlish et al. 2018 ("An Empirical Model of Large-Batch Training") show that the
"simple" noise scale B = tr(S) / |G|^2 (S: the per-example gradient covariance, G: the
true gradient) predicts the critical batch size: below it a batch k times larger
saves nearly k times the steps, far beyond it almost none. Per-example gradients are
not needed: the expected squared norm of a batch-b gradient is |G|^2 + tr(S) / b, so
the mean squared norms at two batch sizes give both unknowns (their appendix A.1):

    |G|^2 = (b_big |g_big|^2 - b_small |g_small|^2) / (b_big - b_small)
    tr(S) = (|g_small|^2 - |g_big|^2) / (1 / b_small - 1 / b_big)

It is read twice: at the weights the fit starts from (`starting_weights`, kept before
the baseline's timed steps) and where those steps left the model, and the larger read
bounds the ladder (`tfaccel.tune.offer.NOISE_SCALE_FACTOR`): the noise scale grows
as the loss falls, fast at first (tens of times in a model's first tens of steps: the
docs' measurements page), so the start's alone would stop the ladder far below
batches the training can use. Where the timed steps took
the model so near a minimum that the batches read cannot resolve the true gradient
through its noise, the noise scale is past what they can read, and nothing caps the
ladder but the data: the race judges. Each read averages SMALL_BATCHES batches at the
user's size and BIG_BATCHES at BIG times it: with four of each, reads of one model
varied tenfold; with 32 and 8, about twofold.
"""

from __future__ import annotations

import math
from typing import Any

SMALL_BATCHES = 32  # batches read at the user's size; their squared norms are averaged
BIG_BATCHES = 8  # and at BIG times it (each far less noisy)
MIN_BATCHES = 4  # fewer examples than this many batches of each size: no estimate
BIG = 8  # the larger batch, this many times the user's
# Weights larger than this are not copied to the host to be read at the start: the
# estimate then reads the weights the timed steps left.
START_BYTES_MAX = 2 << 30


def simple_noise_scale(small: int, big: int, norm2_small: float, norm2_big: float) -> float | None:
    """B_simple from the mean squared gradient norms at two batch sizes; None where the
    estimate is not positive (too few batches to see the noise through)."""
    true_norm2 = (big * norm2_big - small * norm2_small) / (big - small)
    trace = (norm2_small - norm2_big) / (1 / small - 1 / big)
    if true_norm2 <= 0 or trace <= 0:
        return None
    return trace / true_norm2


def starting_weights(model: Any) -> list[Any] | None:
    """A copy of the weights a fit starts from, for `measure` after it; None for a model
    not built yet (built by its first batch) or above START_BYTES_MAX."""
    try:
        size = 4 * sum(math.prod(weight.shape) for weight in model.weights)  # at 32 bits
        return model.get_weights() if 0 < size <= START_BYTES_MAX else None
    except Exception:  # a model whose weights cannot be read whole: the timed ones serve
        return None


class Reading:
    """The baseline's noise scale, read only where a race could judge the model (its
    `trial.race.data_facts` hold no `no_race`): made before the timed steps, it keeps
    the weights the fit starts from; `payload` reads after them, at both."""

    def __init__(self, model: Any, baseline: bool, facts: dict[str, Any]) -> None:
        self.wanted = baseline and "no_race" not in facts
        self.start = starting_weights(model) if self.wanted else None

    def payload(self, model: Any, examples: Any, batch: int) -> dict[str, Any]:
        return measure(model, examples, batch, self.start) if self.wanted else {}


def measure(
    model: Any, examples: Any, batch: int, start: list[Any] | None = None
) -> dict[str, Any]:
    """The payload's `noise_scale` (and the batch sizes it was read at) for a model
    trained by Keras' own train_step, from `examples` (single examples): the larger of
    the reads at the weights `start` (`starting_weights`; the trained ones are put back
    after) and at the model's own; where it cannot be read, `noise_scale_why` says why
    (the offer's ladder then has no cap but the data's, and the tune says so)."""
    late = _measure(model, examples, batch)
    if start is None:
        return _payload(late)
    trained = model.get_weights()
    model.set_weights(start)
    try:
        early = _measure(model, examples, batch)
    finally:
        model.set_weights(trained)
    if "noise_scale" in early and "noise_scale" in late:
        return _payload(max(early, late, key=lambda read: read["noise_scale"]))
    return _payload(late if "noise_scale" in late or late.get("hidden") else early)


def _payload(read: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in read.items() if key != "hidden"}


def _measure(model: Any, examples: Any, batch: int) -> dict[str, Any]:
    """One read: the estimate, or why there is none (`hidden`: the noise hides the
    true gradient, so the noise scale is past what these batches can read)."""
    from tfaccel.workloads.inputs import in_batches

    sizes = (batch, BIG * batch)
    norms = []
    try:
        for size, count in zip(sizes, (SMALL_BATCHES, BIG_BATCHES), strict=True):
            found = [
                _norm2(model, element) for element in in_batches(examples, size, True).take(count)
            ]
            if len(found) < MIN_BATCHES:
                return {"noise_scale_why": f"fewer examples than {MIN_BATCHES} batches of {size}"}
            norms.append(sum(found) / len(found))
    except Exception as exc:  # data read once (a generator), a loss compute_loss cannot give
        said = str(exc).strip().splitlines()[:1]
        why = f"{type(exc).__name__}: {said[0][:160]}" if said else type(exc).__name__
        return {"noise_scale_why": f"its gradients could not be read ({why})"}
    scale = simple_noise_scale(*sizes, *norms)
    if scale:
        return {"noise_scale": round(scale, 1), "noise_scale_batches": list(sizes)}
    if BIG * norms[1] <= norms[0]:  # |G|^2 <= 0: the noise hides the true gradient
        why = (
            f"where the baseline's steps took the model, the gradient's noise hides its mean "
            f"at batches {sizes[0]} and {sizes[1]}: the noise scale is past what they read"
        )
        return {"noise_scale_why": why, "hidden": True}
    why = f"the gradient norms at batches {sizes[0]} and {sizes[1]} did not differ as noise would"
    return {"noise_scale_why": why}


def _norm2(model: Any, element: Any) -> float:
    """|g|^2 of the compiled loss on one batch, in float32, the weights left as they are."""
    import keras

    from tfaccel._tf import import_tensorflow

    tf = import_tensorflow()
    x, y, weight = keras.utils.unpack_x_y_sample_weight(element)
    with tf.GradientTape() as tape:
        y_pred = model(x, training=True)
        loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=weight)
    grads = tape.gradient(loss, model.trainable_weights)
    squares = [
        tf.reduce_sum(tf.square(tf.cast(grad, "float32"))) for grad in grads if grad is not None
    ]
    return float(tf.add_n(squares))
