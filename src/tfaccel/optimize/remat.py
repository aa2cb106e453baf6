"""Gradient checkpointing that works for every Keras layer on the TensorFlow backend.

`keras.RematScope` wraps each layer's call in `keras.remat`, which on TensorFlow is
`tf.recompute_grad`. Its `custom_gradient` refuses keyword arguments outside eager mode
("supports keywords arguments only when eager execution is enabled"), and Keras calls
every layer that takes `training` with `training=...`: BatchNormalization and Dropout,
so ResNet-50, BERT and most real models fail on their first training step.

It refuses other things too: Keras' `GetItem` operation (`x[:, 0]`, BERT's pooled
output) passes its slices positionally, and `recompute_grad` converts every positional
argument to a tensor. And where it runs, dropout in the recomputed pass draws new
masks, so the gradient is of another network.

`install()` gives Keras a `remat` that takes every floating tensor out of the
arguments, nested or not, as a positional argument of the recomputed function (so
gradients still flow to it), binds everything else (`training`, slices, None, bool
masks, integer ids) into it, and replays the layer's random seeds and its autocast
scope (mixed precision failed with "float32 does not match bfloat16") in the
recomputation. It replaces only the TensorFlow backend's function, once per process.
"""

from __future__ import annotations

import functools
from typing import Any

from tfaccel._tf import import_tensorflow

_MARK = "_tfaccel_remat"


def _seed_generators(f: Any) -> list[Any]:
    """The Keras SeedGenerators `f` draws from, when it is a layer's call: those of the
    layer and of every layer inside it (Dropout's, KerasHub's)."""
    owner = getattr(f, "__self__", None)
    flatten = getattr(owner, "_flatten_layers", None)
    if flatten is None:
        return []
    return [g for layer in flatten() for g in getattr(layer, "_seed_generators", ())]


def remat(f: Any) -> Any:
    """`tf.recompute_grad(f)` for any call: every floating tensor in the arguments, nested
    or not, positional or keyword, becomes a positional argument of the recomputed
    function (so gradients flow to it); everything else (`training=True`, a slice, None,
    a bool mask, token ids) is bound.

    The recomputation draws the same random numbers as the forward pass: the layer's
    seed generators are set back to their state before the forward pass while it runs,
    and to their state before the recomputation after it. Otherwise dropout would drop
    other units in the recomputed pass, and the gradient would be of another network.
    It also runs under the forward pass's autocast scope: under a mixed policy Keras
    casts the float32 variables to the compute dtype only inside the layer's call, and
    the recomputation runs later, in the backward pass, outside it.
    """
    tf = import_tensorflow()
    from keras.src import backend as keras_backend

    generators = _seed_generators(f)

    @functools.wraps(f)
    def call(*args: Any, **kwargs: Any) -> Any:
        structure = (args, kwargs)
        leaves = tf.nest.flatten(structure)
        # Floating tensors only: a bool or integer one (a padding mask, token ids) has
        # no gradient, and recompute_grad would try to make one for it.
        is_tensor = [
            isinstance(x, tf.Tensor) and (x.dtype.is_floating or x.dtype.is_complex) for x in leaves
        ]
        scope = keras_backend.get_autocast_scope()
        autocast = scope.dtype if scope is not None else None
        before: list[Any] = []  # the seed states the forward pass started from

        def bound(*tensors: Any) -> Any:
            with keras_backend.AutocastScope(autocast):
                return replay(*tensors)

        def replay(*tensors: Any) -> Any:
            given = iter(tensors)
            filled = [next(given) if t else x for x, t in zip(leaves, is_tensor, strict=True)]
            a, k = tf.nest.pack_sequence_as(structure, filled)
            if not generators:
                return f(*a, **k)
            now = [tf.identity(g.state.value) for g in generators]
            if not before:  # the forward pass
                before.extend(now)
                return f(*a, **k)
            for g, state in zip(generators, before, strict=True):  # the recomputation
                g.state.assign(state)
            out = f(*a, **k)
            for g, state in zip(generators, now, strict=True):
                g.state.assign(state)
            return out

        return tf.recompute_grad(bound)(*(x for x, t in zip(leaves, is_tensor, strict=True) if t))

    setattr(call, _MARK, True)
    return call


def install() -> bool:
    """Make Keras' TensorFlow backend use `remat` above. True if it is in place (now or
    before); False on another backend, where Keras' own remat has no such limit."""
    import keras

    if keras.backend.backend() != "tensorflow":
        return False
    from keras.src import backend as keras_backend

    core = keras_backend.core
    if getattr(core.remat, _MARK, False):
        return True
    wrapped = functools.wraps(core.remat)(lambda f: remat(f))
    setattr(wrapped, _MARK, True)
    core.remat = wrapped
    return True
