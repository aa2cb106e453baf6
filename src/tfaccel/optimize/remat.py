"""Gradient checkpointing that works for every Keras layer on the TensorFlow backend.

`keras.RematScope` wraps each layer's call in `keras.remat`, which on TensorFlow is
`tf.recompute_grad`. Its `custom_gradient` refuses keyword arguments outside eager mode
("supports keywords arguments only when eager execution is enabled"), and Keras calls
every layer that takes `training` with `training=...`: BatchNormalization and Dropout,
so ResNet-50, BERT and most real models fail on their first training step.

`install()` gives Keras a `remat` that moves the keywords out of the call first: tensor
keywords become positional arguments (so gradients still flow to them), everything else
(`training`, masks given as Python values, None) is bound into the recomputed function.
It replaces only the TensorFlow backend's function, once per process, and leaves every
call without keywords to `tf.recompute_grad` exactly as before.
"""

from __future__ import annotations

import functools
from typing import Any

from tfaccel._tf import import_tensorflow

_MARK = "_tfaccel_remat"


def remat(f: Any) -> Any:
    """`tf.recompute_grad(f)` that also takes keyword arguments in graph mode."""
    tf = import_tensorflow()

    @functools.wraps(f)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not kwargs:
            return tf.recompute_grad(f)(*args)
        names = sorted(k for k, v in kwargs.items() if isinstance(v, (tf.Tensor, tf.Variable)))
        fixed = {k: v for k, v in kwargs.items() if k not in names}
        n = len(args)

        def bound(*flat: Any) -> Any:
            return f(*flat[:n], **fixed, **dict(zip(names, flat[n:], strict=True)))

        return tf.recompute_grad(bound)(*args, *(kwargs[k] for k in names))

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
