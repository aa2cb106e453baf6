"""Projections' einsums as one 2-D matrix product, so their kernel gradient is one GEMM.

Keras 3's TensorFlow backend computes an `EinsumDense` projection such as
"abc,cde->abde" (the query, key and value of `MultiHeadAttention`, KerasHub's BERT and
GPT-2) or "abcd,cde->abe" (the attention's output) with `tf.matmul` of the
[batch, tokens, K] input and the kernel reshaped to [K, N]: a batched product whose
kernel operand is broadcast over the batch. TensorFlow's gradient of such a product
computes the kernel's gradient per batch element, a [batch, K, N] tensor, and then sums
it over the batch. At BERT-base's shapes, batch 2048, that is a 2048 x 768 x 768 tensor
written and read back for each of the 48 projections of a step, and a batched GEMM whose
contraction is only 128 tokens long.

In a profile of BERT-base training these kernel gradients are a large share of the
step (`tfaccel profile` reports it as `broadcast_grad`), where one GEMM over all the
tokens would do the same work at the rate of the step's 2-D products.

`configure(einsum=...)` chooses, for the process:
- "keras": Keras' own (the default).
- "flat": the input reshaped to [batch x tokens, K] first, so the forward product is a
  2-D GEMM and TensorFlow's gradient of it is one GEMM for the kernel (contraction over
  every token) and one for the input. The products are the same; the kernel gradient
  is summed in the GEMM's float32 accumulator over all tokens, instead of rounded to
  the compute dtype per sequence and then summed. `tune` holds it to the accuracy guard
  all the same (the sum runs in another order).

Only the equations Keras itself turns into a broadcast product (a projection's: the
kernel has no batch dimension) with static shapes and floating operands of one dtype
change; every other call (int8 quantized kernels, attention's batched einsums, dynamic
shapes) is Keras' own.
"""

from __future__ import annotations

from math import prod
from typing import Any

from tfaccel._tf import import_tensorflow
from tfaccel.optimize._patch import BackendPatch

# Keras' normalized subscripts -> (the kernel's permutation to [contracted..., out...],
# or None when already so; how many of the input's trailing dimensions are contracted).
FLAT_EQUATIONS: dict[str, tuple[tuple[int, ...] | None, int]] = {
    "abc,cd->abd": (None, 1),
    "abc,dc->abd": ((1, 0), 1),
    "abc,cde->abde": (None, 1),
    "abc,dce->abde": ((1, 0, 2), 1),
    "abc,dec->abde": ((2, 0, 1), 1),
    "abcd,cde->abe": (None, 2),
    "abcd,ced->abe": ((0, 2, 1), 2),
    "abcd,ecd->abe": ((1, 2, 0), 2),
}


def _keras_numpy() -> Any:
    """Keras' TensorFlow-backend numpy module (what `keras.ops.einsum` calls)."""
    return _PATCH.module()


def flat_product(subscripts: str, x: Any, y: Any) -> Any | None:
    """`einsum(subscripts, x, y)` as a 2-D matrix product, or None where the call is not
    a projection this module flattens (see the module docstring)."""
    tf = import_tensorflow()
    plan = FLAT_EQUATIONS.get(subscripts)
    if plan is None or not (tf.is_tensor(x) and tf.is_tensor(y)):
        return None
    if x.dtype != y.dtype or not x.dtype.is_floating:
        return None
    perm, contracted = plan
    tokens = x.shape[1:]
    if not tokens.is_fully_defined() or not y.shape.is_fully_defined():
        return None
    kernel = y if perm is None else tf.transpose(y, perm)
    dims = [int(dim) for dim in kernel.shape]
    contracted_size = prod(dims[:contracted])
    out = dims[contracted:]
    if [int(dim) for dim in tokens[-contracted:]] != dims[:contracted]:
        return None  # shapes that do not contract: Keras' error, not ours
    flat = tf.matmul(
        tf.reshape(x, [-1, contracted_size]), tf.reshape(kernel, [contracted_size, prod(out)])
    )
    return tf.reshape(flat, [-1, int(tokens[0]), *out])


def flat_einsum(subscripts: Any, *operands: Any, **kwargs: Any) -> Any:
    """Keras' TensorFlow `einsum`, with projections as 2-D products (`flat_product`)."""
    keras_einsum = _PATCH.keras_own()
    if len(operands) == 2 and not kwargs and isinstance(subscripts, str):
        tf_numpy = _keras_numpy()
        x, y = (tf_numpy.convert_to_tensor(operand) for operand in operands)
        result = flat_product(tf_numpy._normalize_einsum_subscripts(subscripts), x, y)
        if result is not None:
            return result
        return keras_einsum(subscripts, x, y)
    return keras_einsum(subscripts, *operands, **kwargs)


_PATCH = BackendPatch(
    "einsum",
    "numpy",
    "einsum",
    ("_normalize_einsum_subscripts", "convert_to_tensor"),
    {
        "keras": (None, "Keras' einsum"),
        "flat": (
            flat_einsum,
            "projections' einsums as 2-D GEMMs (one GEMM for each kernel gradient)",
        ),
    },
)


def set_einsum(name: str) -> str:
    """Make `keras.ops.einsum` (every `EinsumDense`) use `name`; returns a one-line
    description. Layers look the function up at each call, so models built before or
    after alike use it."""
    return _PATCH.set(name)


def current_einsum() -> str:
    """The name of the einsum in use ("keras" when tfaccel never changed it)."""
    return _PATCH.current()


def count_layers(layers: list[Any]) -> int:
    """How many of `layers` (a model's, nested ones included) are EinsumDense layers,
    the ones this knob changes."""
    import keras

    return sum(1 for x in layers if isinstance(x, keras.layers.EinsumDense))
