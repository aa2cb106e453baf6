"""Mixed precision for code written for float32: what `configure` adds under a mixed
policy (`mixed_bfloat16`, `mixed_float16`) so that the user's own code around and
inside the model runs in 16 bits instead of failing at its first step.

- **A model called from the user's own code returns its 16-bit floating outputs in
  float32.** Keras' mixed precision guide asks for a model's last layer in float32;
  models written for float32 have none, and a `train_step` of the user's own then mixes
  the model's bfloat16 outputs with float32 tensors: a WGAN's gradient penalty,
  `fake_images - real_images`, fails with "Input 'y' of 'Sub' Op has type float32 that
  does not match type bfloat16". Keras' own losses already compute in float32 (they cast
  `y_pred`), so `fit`'s own `train_step` computes the same losses; nothing is rounded
  (the cast widens), and gradients flow back through it in 16 bits as before. Only the
  entry call is widened: a model called inside another layer's call (a backbone inside
  a functional model) hands its next layer 16-bit outputs, and a call on symbolic
  `keras.Input` tensors (building a functional model) is left as written, so that the
  user's graph and what it saves do not change.
- **Gaussian noise drawn inside a 16-bit layer's call comes in the layer's compute
  dtype.** `keras.random.normal` (and `truncated_normal`) without a dtype gives
  float32, which a layer's 16-bit activations cannot be multiplied with: keras-io's
  VAE `Sampling` layer, `z_mean + ops.exp(0.5 * z_log_var) * epsilon`, fails when the
  model is built ("Input 'y' of 'Mul' Op has type float32 that does not match type
  bfloat16"). Where Keras autocasts a layer's call to 16 bits, such a draw takes that
  dtype, as the layer's variables do; a dtype the code names is kept, and
  `keras.random.uniform` (masks, comparisons with a rate) is left in float32.

A model or layer whose own policy is not mixed (float32, or `bfloat16` weights for
inference) is left alone. The accuracy guard holds these 16-bit trials as any other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfaccel._tf import import_tensorflow

# What configure's report says of it (its "outputs" row, in `tfaccel run`'s lines too).
MIXED_CODE = (
    "a model called from your code returns float32 outputs, and keras.random.normal in "
    "a 16-bit layer draws in its dtype: mixed precision for code written for float32"
)
_SIXTEEN_BIT = ("bfloat16", "float16")
# Keras' own functions, kept while the replacements are in place.
_KERAS: dict[str, Any] = {}
_NOISE = ("normal", "truncated_normal")  # (shape, mean, stddev, dtype, seed)
_DTYPE_AT = 3


def set_mixed_code(on: bool) -> None:
    """Put the replacements in place (`on`), or give Keras its own functions back."""
    import keras.src.backend.tensorflow.random as random
    from keras.src.models.model import Model

    if on and not _KERAS:
        _KERAS["call"] = Model.__call__
        _KERAS["own_call"] = Model.__dict__.get("__call__")  # None: Layer's, inherited
        Model.__call__ = _call_with_float32_outputs
        for name in _NOISE:
            _KERAS[name] = getattr(random, name)
            setattr(random, name, _in_compute_dtype(_KERAS[name]))
    elif not on and _KERAS:
        if Model.__dict__.get("__call__") is _call_with_float32_outputs:
            if _KERAS["own_call"] is None:
                del Model.__call__
            else:
                Model.__call__ = _KERAS["own_call"]
        for name in _NOISE:
            setattr(random, name, _KERAS[name])
        _KERAS.clear()


def mixed_code_on() -> bool:
    return bool(_KERAS)


def _call_with_float32_outputs(self: Any, *args: Any, **kwargs: Any) -> Any:
    from keras.src.backend.common import global_state

    entry = global_state.get_global_attribute("current_call_ctx") is None
    outputs = _KERAS["call"](self, *args, **kwargs)
    if not entry or not _mixed(self):
        return outputs
    tf = import_tensorflow()

    def widened(value: Any) -> Any:
        if isinstance(value, tf.Tensor) and value.dtype.name in _SIXTEEN_BIT:
            return tf.cast(value, tf.float32)
        return value

    return tf.nest.map_structure(widened, outputs)


def _mixed(model: Any) -> bool:
    """Does the model compute in 16 bits with float32 variables (a mixed policy)?"""
    return (
        getattr(model, "compute_dtype", None) in _SIXTEEN_BIT
        and getattr(model, "variable_dtype", None) == "float32"
    )


def _in_compute_dtype(keras_draw: Callable[..., Any]) -> Callable[..., Any]:
    """Keras' draw, in the autocast scope's dtype where the code names none."""

    def draw(*args: Any, **kwargs: Any) -> Any:
        from keras.src.backend.common.variables import get_autocast_scope

        scope = get_autocast_scope()
        dtype = args[_DTYPE_AT] if len(args) > _DTYPE_AT else kwargs.get("dtype")
        if scope is not None and dtype is None and scope.dtype in _SIXTEEN_BIT:
            if len(args) > _DTYPE_AT:
                args = (*args[:_DTYPE_AT], scope.dtype, *args[_DTYPE_AT + 1 :])
            else:
                kwargs["dtype"] = scope.dtype
        return keras_draw(*args, **kwargs)

    return draw
