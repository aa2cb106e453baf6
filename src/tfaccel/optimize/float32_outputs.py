"""Under a mixed precision policy, a model called from the user's own code returns its
16-bit floating outputs in float32.

Keras' mixed precision guide asks for a model's last layer in float32; models written
for float32 never have one, and a `train_step` of the user's own then mixes the
model's bfloat16 (or float16) outputs with float32 tensors: a WGAN's gradient penalty,
`fake_images - real_images`, fails with "Input 'y' of 'Sub' Op has type float32 that
does not match type bfloat16". Keras' own losses already compute in float32 (they cast
`y_pred`), so for `fit`'s own `train_step` the cast only moves; nothing is rounded (the
cast widens), and gradients flow back through it in 16 bits as before.

Only the entry call is cast: a model called inside another layer's call (a backbone
inside a functional model) keeps its 16-bit outputs for the next layer, and a call on
symbolic `keras.Input` tensors (building a functional model) is left as written, so
that the user's model graph and what it saves do not change. A model whose own policy
is not mixed (float32, or `bfloat16` weights for inference) is left alone.
"""

from __future__ import annotations

from typing import Any

from tfaccel._tf import import_tensorflow

_SIXTEEN_BIT = ("bfloat16", "float16")
_KERAS_CALL: dict[str, Any] = {}  # Layer.__call__, kept while the patch is in place


def set_float32_outputs(on: bool) -> None:
    """Cast the outputs of models' entry calls to float32 (`on`), or let Keras' own
    `Layer.__call__` serve models again."""
    from keras.src.models.model import Model

    if on and "call" not in _KERAS_CALL:
        _KERAS_CALL["call"] = Model.__call__
        _KERAS_CALL["own"] = Model.__dict__.get("__call__")  # None: Layer's, inherited
        Model.__call__ = _call_with_float32_outputs
    elif not on and "call" in _KERAS_CALL:
        own = _KERAS_CALL.pop("own")
        if Model.__dict__.get("__call__") is _call_with_float32_outputs:
            if own is None:
                del Model.__call__
            else:
                Model.__call__ = own
        _KERAS_CALL.pop("call")


def float32_outputs_on() -> bool:
    return "call" in _KERAS_CALL


def _call_with_float32_outputs(self: Any, *args: Any, **kwargs: Any) -> Any:
    from keras.src.backend.common import global_state

    entry = global_state.get_global_attribute("current_call_ctx") is None
    outputs = _KERAS_CALL["call"](self, *args, **kwargs)
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
