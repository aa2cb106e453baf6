"""cuDNN's algorithm for Keras' LSTM and GRU layers (`rnn_algorithm`).

On a GPU, Keras runs an LSTM or GRU layer whose arguments cuDNN supports through
TensorFlow's `CudnnRNNV3` op, which always takes cuDNN's standard algorithm: a kernel
per time step, which leaves the GPU waiting at small batches. cuDNN's persistent
algorithms keep the recurrent weights on chip across the steps ("persist_static": one
plan for the shapes; "persist_dynamic": compiled for them at run time). TensorFlow
chooses one only through its debug variables, read once per process when the first
RNN op is built, so they are set with the runtime's other variables, before it starts:
`TF_DEBUG_CUDNN_RNN=1`, `TF_DEBUG_CUDNN_RNN_ALGO` (cuDNN's `cudnnRNNAlgo_t`), and
`TF_DEBUG_CUDNN_RNN_USE_TENSOR_OPS`, on except under strict float32 (TF32 off), as
TensorFlow's own choice follows TF32.

The arithmetic is the same but for its summation order, yet with the persistent dynamic
algorithm in tune's answer keras-io's LSTM script validated worse under `tfaccel run`
than under plain python, while its training losses stayed alike (all that the accuracy
guard reads): tune does not try the knob (its `TuneTry.withheld`), which a settings
file may still set.
A layer cuDNN cannot run (another activation, `recurrent_dropout`, `use_cudnn=False`,
`unroll`) is left to Keras' own loop, which this does not touch.
"""

from __future__ import annotations

from typing import Any

from tfaccel.optimize.environment import set_env
from tfaccel.optimize.report import Applied, AppliedStatus
from tfaccel.optimize.settings import Settings

ENV_DEBUG = "TF_DEBUG_CUDNN_RNN"
ENV_ALGO = "TF_DEBUG_CUDNN_RNN_ALGO"
ENV_TENSOR_OPS = "TF_DEBUG_CUDNN_RNN_USE_TENSOR_OPS"

# cuDNN's cudnnRNNAlgo_t for each choice but TensorFlow's default.
ALGORITHM_IDS = {"persist_static": "1", "persist_dynamic": "2"}


def environment(settings: Settings) -> dict[str, str | None]:
    """The variables `settings` asks for (None: unset, TensorFlow's default)."""
    algo = ALGORITHM_IDS.get(settings.rnn_algorithm)
    if algo is None:
        return {ENV_DEBUG: None, ENV_ALGO: None, ENV_TENSOR_OPS: None}
    tensor_ops = "0" if settings.precision == "float32" else "1"
    return {ENV_DEBUG: "1", ENV_ALGO: algo, ENV_TENSOR_OPS: tensor_ops}


def apply(settings: Settings, initialized: bool) -> Applied:
    """Set the variables before TensorFlow's runtime starts (refused after, as the
    allocator is, unless they already say the same)."""
    statuses = [
        set_env(name, value, initialized, f"rnn_algorithm={settings.rnn_algorithm!r}")
        for name, value in environment(settings).items()
    ]
    status: AppliedStatus = "applied" if "applied" in statuses else "unchanged"
    how = (
        "TensorFlow's default (cuDNN's standard algorithm)"
        if settings.rnn_algorithm == "default"
        else f"cuDNN's {settings.rnn_algorithm.replace('_', ' ')} algorithm for LSTM and GRU "
        "layers (TensorFlow's TF_DEBUG_CUDNN_RNN variables)"
    )
    return Applied("rnn_algorithm", settings.rnn_algorithm, status, how)


def count_layers(layers: list[Any]) -> int:
    """The LSTM and GRU layers among `layers` that Keras runs on cuDNN on a GPU, by
    Keras' own rule for their arguments."""
    import sys

    import keras

    # Keras' TensorFlow backend module of that name (its package exports a function
    # `rnn` that hides the module from `from ... import`); loaded with the backend.
    tf_rnn = sys.modules.get("keras.src.backend.tensorflow.rnn")
    if tf_rnn is None:
        return 0
    count = 0
    more: tuple[Any, ...]
    for layer in layers:
        if isinstance(layer, keras.layers.LSTM):
            rule, more = tf_rnn._do_lstm_arguments_support_cudnn, ()
        elif isinstance(layer, keras.layers.GRU):
            rule, more = tf_rnn._do_gru_arguments_support_cudnn, (layer.cell.reset_after,)
        else:
            continue
        cell = layer.cell
        supported = rule(
            cell.activation, cell.recurrent_activation, layer.unroll, cell.use_bias, *more
        )
        cudnn = getattr(layer, "use_cudnn", "auto") in ("auto", True)
        count += bool(supported and cudnn and not cell.recurrent_dropout)
    return count
