"""Keras' multi-head attention through cuDNN's flash attention, under XLA, on the GPU.

Keras' `MultiHeadAttention` (and KerasHub's layers, which subclass it) writes attention
out: the scores, their softmax and dropout, [batch, heads, T, S] tensors that XLA
writes to memory and reads back, forward and backward. cuDNN's flash attention keeps
them on chip. XLA used to form it from that written-out pattern, but deleted the
rewriter in 2025 (openxla/xla#22225): a framework now emits cuDNN's custom call itself,
as JAX's `dot_product_attention` does. TensorFlow has no op for it; `XlaCustomCallV2`
emits the same custom call, with the backend config in JAX's format
(jax/_src/cudnn/fused_attention_stablehlo.py), here in the BNTH layout, the one whose
operands and results all have XLA's default layouts.

`configure(attention="cudnn")` patches `MultiHeadAttention._compute_attention`; a call
goes through cuDNN when it is traced for XLA (`jit_compile`), with 16-bit heads of size
8-128 in steps of 8, no scores asked for and no causal flag. Its boolean mask becomes an
additive bias. Every other call, and every call outside XLA, runs Keras' own code.
`configure.reset()` restores it.

Dropout: a training call whose layer has dropout runs Keras' own attention. cuDNN can
drop out inside its kernel, and `flash_attention(dropout=...)` emits that call, but
with TF 2.21 the first execution of it crashes the process (a segmentation fault, on
an H200), on TensorFlow's own XLA path and through PjRt alike
(`--tf_xla_use_device_api_for_xla_launch`); the same calls without dropout run. So
BERT's training (dropout 0.1 in every attention layer) keeps Keras' attention, and
`tune` does not try it there. Inference, and attention layers without dropout, go to
cuDNN.

XLA compiles the forward and backward calls, with and without the bias, and they match
attention written out in float32 within bf16 rounding (the GPU tests check it). At 128
tokens XLA's own fusions hold their own; flash attention pays with longer sequences,
whose scores outgrow the caches.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from tfaccel import _compat
from tfaccel._tf import import_tensorflow, tf_internal
from tfaccel.errors import InputError
from tfaccel.hardware.capabilities import supports
from tfaccel.optimize.settings import ATTENTIONS

# (backward, dropout, bias) -> cuDNN's custom call, as XLA and JAX name them.
TARGETS = {
    (False, False, False): "__cudnn$fmhaSoftmax",
    (False, False, True): "__cudnn$fmhaScaleBiasSoftmax",
    (False, True, False): "__cudnn$fmhaSoftmaxDropout",
    (False, True, True): "__cudnn$fmhaScaleBiasSoftmaxDropout",
    (True, False, False): "__cudnn$fmhaSoftmaxBackward",
    (True, False, True): "__cudnn$fmhaScaleBiasSoftmaxBackward",
    (True, True, False): "__cudnn$fmhaSoftmaxDropoutBackward",
    (True, True, True): "__cudnn$fmhaScaleBiasSoftmaxDropoutBackward",
}
# BNTH: ((lhs contracting, rhs contracting), (lhs batch, rhs batch)) of each product.
_FWD_DOTS = {
    "bmm1_dot_dimension_numbers": ((3, 3), ((0, 1), (0, 1))),  # BNTH,BNSH->BNTS
    "bmm2_dot_dimension_numbers": ((3, 2), ((0, 1), (0, 1))),  # BNTS,BNSH->BNTH
}
_BWD_DOTS = {
    "bmm1_grad_gemm1_dot_dimension_numbers": ((2, 2), ((0, 1), (0, 1))),  # dP,Q->dK
    "bmm1_grad_gemm2_dot_dimension_numbers": ((3, 2), ((0, 1), (0, 1))),  # dP,K->dQ
    "bmm2_grad_gemm1_dot_dimension_numbers": ((2, 2), ((0, 1), (0, 1))),  # P,dO->dV
    "bmm2_grad_gemm2_dot_dimension_numbers": ((3, 3), ((0, 1), (0, 1))),  # dO,V->dP
}
# What a masked score is set to in bf16: cuDNN's workaround value (as JAX uses), not
# -inf, whose subtraction inside the kernel misbehaves.
MASKED = -float(2 << 40)


def flash_capable(compute_capability: str | None) -> bool:
    """Does a GPU of this compute capability run cuDNN's flash attention?"""
    return supports(compute_capability, "flash_attention")


def backend_config(
    shape: tuple[int, int, int, int],
    kv_len: int,
    dtype: str,
    scale: float,
    dropout: float,
    seed: int,
    backward: bool,
) -> str:
    """cuDNN's flash-attention backend config for queries of `shape` (B, N, T, H) and
    `kv_len` keys, as XLA parses it (JSON of its GpuBackendConfig)."""
    b, n, t, _ = shape
    layout = {
        "dim_level_types": [],
        "dim_unique": [],
        "dim_ordered": [],
        "minor_to_major": ["3", "2", "1", "0"],
        "tiles": [],
        "element_size_in_bits": "0",
        "memory_space": "0",
        "index_primitive_type": "PRIMITIVE_TYPE_INVALID",
        "pointer_primitive_type": "PRIMITIVE_TYPE_INVALID",
        "dynamic_shape_metadata_prefix_bytes": "0",
    }
    config: dict[str, Any] = {
        "algorithm": {
            "algo_id": "0",
            "math_type": "TENSOR_OP_MATH",
            "tuning_knobs": {"17": "1", "24": "0"},
            "is_cudnn_frontend": True,
            "workspace_size": "0",
        },
        "fmha_scale": scale,
        "dropout_rate": dropout,
        "intermediate_tensor_shape": {
            "element_type": {"bfloat16": "BF16", "float16": "F16"}[dtype],
            "dimensions": [str(b), str(n), str(t), str(kv_len)],
            "tuple_shapes": [],
            "layout": layout,
            "is_dynamic_dimension": [False] * 4,
        },
        "seed": seed,
        "is_flash_attention": True,
        "mask_type": "NO_MASK",
        "sliding_window_length": 0,
    }
    for key, ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)) in (
        _BWD_DOTS if backward else _FWD_DOTS
    ).items():
        config[key] = {
            "lhs_contracting_dimensions": [str(lhs_contracting)],
            "rhs_contracting_dimensions": [str(rhs_contracting)],
            "lhs_batch_dimensions": [str(i) for i in lhs_batch],
            "rhs_batch_dimensions": [str(i) for i in rhs_batch],
        }
    return json.dumps(
        {
            "operation_queue_id": "0",
            "wait_on_operation_queues": [],
            "cudnn_fmha_backend_config": config,
        }
    )


def _custom_call(
    operands: list[Any], target: str, config: str, dtypes: list[Any], shapes: list[Any]
) -> Any:
    gen_xla_ops = tf_internal("compiler.tf2xla.ops.gen_xla_ops")

    return gen_xla_ops.xla_custom_call_v2(
        operands=operands,
        call_target_name=target,
        backend_config=config,
        has_side_effect=False,
        result_dtypes=dtypes,
        result_shapes=shapes,
    )


def flash_attention(
    q: Any, k: Any, v: Any, bias: Any = None, dropout: float = 0.0, seed: int = 0
) -> Any:
    """softmax(q k^T / sqrt(H) + bias), dropped out, times v, through cuDNN, with its
    gradient through cuDNN's backward call. q, k, v: [B, N, T|S, H] in bf16 or fp16;
    bias: [B or 1, 1, T, S] of the same dtype, or None. XLA only: the custom calls have
    no kernel outside a `jit_compile` function. A `dropout` above 0 (with `seed`) emits
    cuDNN's dropout calls, which crash TF 2.21 at run time (see the module's docstring):
    for the probe and the GPU test that watch for a fixed release."""
    tf = import_tensorflow()
    b, n, t, h = (int(d) for d in q.shape)
    shape = (b, n, t, h)
    kv_len = int(k.shape[2])
    scale = 1.0 / math.sqrt(h)
    dtype = q.dtype.name
    extra = [] if bias is None else [bias]
    has_bias, has_dropout = bias is not None, dropout > 0.0

    @tf.custom_gradient
    def attend(q: Any, k: Any, v: Any, *extra: Any) -> Any:
        out, stats, _ = _custom_call(
            [q, k, v, *extra],
            TARGETS[(False, has_dropout, has_bias)],
            backend_config(shape, kv_len, dtype, scale, dropout, seed, backward=False),
            [q.dtype, tf.float32, tf.uint8],
            [list(shape), [b, n, t], [0]],
        )

        def grad(d_out: Any) -> Any:
            dq, dk, dv, _ = _custom_call(
                [q, k, v, stats, d_out, *extra, out],
                TARGETS[(True, has_dropout, has_bias)],
                backend_config(shape, kv_len, dtype, scale, dropout, seed, backward=True),
                [q.dtype, k.dtype, v.dtype, tf.uint8],
                [list(shape), list(k.shape), list(v.shape), [0]],
            )
            return (dq, dk, dv, *[tf.zeros_like(x) for x in extra])  # the mask: constant

        return out, grad

    return attend(q, k, v, *extra)


def in_xla_context() -> bool:
    """Is the current trace compiled by XLA (inside a `jit_compile` function)?"""
    ops = tf_internal("python.framework.ops")
    control_flow_util = tf_internal("python.ops.control_flow_util")

    tf = import_tensorflow()
    if tf.executing_eagerly():
        return False
    return bool(control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph()))


def fits(query: Any, key: Any, value: Any) -> bool:
    """Do these [B, T|S, N, H] heads fit cuDNN's flash attention? 16-bit, H of 8-128 in
    steps of 8, keys and values of one size, static sequence lengths."""
    if len(query.shape) != 4 or len(key.shape) != 4 or len(value.shape) != 4:
        return False
    if query.dtype.name not in ("bfloat16", "float16"):
        return False
    if not (query.dtype == key.dtype == value.dtype):
        return False
    head_dim = query.shape[-1]
    if (
        head_dim is None
        or head_dim > 128
        or head_dim % 8
        or key.shape[-1] != head_dim
        or value.shape[-1] != head_dim
    ):
        return False
    return None not in (query.shape[1], key.shape[1])


def _bias_of(mask: Any, q_heads: Any, kv_len: int, dtype: Any) -> Any:
    """Keras' boolean attention mask ([B, T, S], or one that broadcasts to it) as an
    additive [B, 1, T, S] bias: 0 where attended, MASKED where not."""
    tf = import_tensorflow()
    keep = tf.cast(mask, tf.bool)
    while len(keep.shape) < 4:
        keep = keep[:, None] if len(keep.shape) == 3 else keep[None]
    shape = [tf.shape(q_heads)[0], 1, q_heads.shape[2], kv_len]
    return tf.cast(tf.broadcast_to(tf.where(keep, 0.0, MASKED), shape), dtype)


_KERAS: dict[str, Callable[..., Any]] = {}
# Calls traced through cuDNN since the process began (a trial reports it: a tune's
# attention=cudnn trial where no call fitted ran Keras' attention, and says so).
_TRACED = {"cudnn": 0}


def cudnn_calls() -> int:
    """How many MultiHeadAttention calls were traced through cuDNN in this process."""
    return _TRACED["cudnn"]


def _mha_class() -> Any:
    import keras

    if keras.backend.backend() != "tensorflow":
        raise InputError(
            "configure(attention='cudnn') needs Keras' TensorFlow backend",
            expected="KERAS_BACKEND=tensorflow",
            received=f"backend {keras.backend.backend()!r}",
        )
    from keras.src.layers.attention.multi_head_attention import MultiHeadAttention

    if not hasattr(MultiHeadAttention, "_compute_attention"):
        raise InputError(
            "this Keras version's MultiHeadAttention has no _compute_attention",
            expected=f"a Keras with it (verified on {_compat.KERAS_VERIFIED})",
            received=f"keras {keras.__version__}",
            hint="configure(attention='keras') leaves Keras' attention as it is",
        )
    return MultiHeadAttention


def _cudnn_compute_attention(  # type: ignore[no-untyped-def]
    self,
    query,
    key,
    value,
    attention_mask=None,
    training=None,
    return_attention_scores=False,
    use_causal_mask=False,
):
    """MultiHeadAttention._compute_attention through cuDNN where it can (see the module's
    docstring); Keras' own everywhere else."""
    keras_own = _KERAS["_compute_attention"]
    if (
        # Dropout: see the module's docstring. A training flag that is a tensor may be
        # true, so it keeps Keras' attention too.
        (training is not None and training is not False and float(self._dropout) > 0.0)
        or return_attention_scores
        or use_causal_mask
        or not fits(query, key, value)
        or not in_xla_context()
    ):
        return keras_own(
            self,
            query,
            key,
            value,
            attention_mask,
            training,
            return_attention_scores,
            use_causal_mask,
        )
    tf = import_tensorflow()
    _TRACED["cudnn"] += 1
    q, k, v = (tf.transpose(x, [0, 2, 1, 3]) for x in (query, key, value))  # -> BNTH
    bias = None if attention_mask is None else _bias_of(attention_mask, q, int(k.shape[2]), q.dtype)
    out = flash_attention(q, k, v, bias)
    return tf.transpose(out, [0, 2, 1, 3]), None


def set_attention(name: str) -> str:
    """Make every Keras MultiHeadAttention use `name` ("keras" or "cudnn"); returns a
    one-line description. Layers look the method up at each call, so models built
    before or after alike use it."""
    if name not in ATTENTIONS:
        raise InputError("unknown attention", expected=" | ".join(ATTENTIONS), received=repr(name))
    mha = _mha_class()
    _KERAS.setdefault("_compute_attention", mha._compute_attention)
    if name == "keras":
        mha._compute_attention = _KERAS["_compute_attention"]
        return "Keras' own (scores, softmax and dropout written out)"
    mha._compute_attention = _cudnn_compute_attention
    return (
        "cuDNN's flash attention under XLA (16-bit heads of 8-128), the mask as a bias; "
        "Keras' own for training calls with dropout (cuDNN's crashes TF 2.21) and "
        "everywhere else"
    )


def current_attention() -> str:
    """The attention in use ("keras" when tfaccel never changed it)."""
    try:
        mha = _mha_class()
    except InputError:
        return "keras"
    return "cudnn" if mha._compute_attention is _cudnn_compute_attention else "keras"


def count_layers(layers: list[Any]) -> int:
    """How many of `layers` (a model's, nested ones included) are Keras
    MultiHeadAttention layers (KerasHub's subclasses too), the ones this knob changes."""
    import keras

    return sum(1 for x in layers if isinstance(x, keras.layers.MultiHeadAttention))


def count_dropping_layers(layers: list[Any]) -> int:
    """How many of those have attention dropout: their training calls stay on Keras'
    attention (cuDNN's dropout crashes TF 2.21), so they gain nothing."""
    import keras

    return sum(
        1
        for x in layers
        if isinstance(x, keras.layers.MultiHeadAttention) and float(x._dropout) > 0
    )
