"""Dropout's random masks, made cheaper for XLA.

Keras 3 (TensorFlow backend) drops out through `tf.nn.experimental.stateless_dropout`:
one 32-bit Philox word per element from TensorFlow's auto-selected algorithm, turned
into a uniform of the input's dtype and compared with the rate. Under XLA the random
bits are computed inside the kernels that use them, for the forward pass and again
wherever the backward pass needs the mask.

On the CPU under XLA, TensorFlow's auto-selected random path is far slower than Philox
asked for by name, which philox16 uses; on a GPU the gain is small (the measurements
page has the figures), so `tune` tries these behind the accuracy guard.

`configure(dropout=...)` replaces Keras' dropout for the process:
- "keras": Keras' own (the default).
- "mask_once": the same masks, bit for bit (same seed, same algorithm, same
  comparison), computed once: XLA keeps the forward pass's keep-mask (one byte an
  element) for the backward pass instead of computing the random bits again. Results
  are Keras'.
- "philox16": two 16-bit random numbers from each 32-bit Philox word, so half the words
  are generated; the mask is kept as with "mask_once". An element is kept with
  probability 1 - round(rate * 65536) / 65536 (rate 0.1: 0.8999939 instead of 0.9), and
  kept elements are scaled by 1 / (1 - rate) as Keras does. The masks differ from
  Keras' (another stream of the same distribution), so `tune` holds it to the accuracy
  guard. Under a 16-bit policy Keras' own uniform has 8 bits of precision, coarser
  than these 16.

The choice changes speed only where XLA compiles the training step; without XLA the
mask is an ordinary tensor either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfaccel._tf import import_tensorflow, tf_internal
from tfaccel.errors import InputError
from tfaccel.optimize._patch import BackendPatch


def _keras_random() -> Any:
    """Keras' TensorFlow-backend random module (what `keras.random.dropout` calls)."""
    return _PATCH.module()


def _kept(keep: Any) -> Any:
    """`keep`, through an XLA optimization barrier: the mask is materialized once and
    read by the forward and backward passes, not recomputed inside each of their
    kernels. Outside XLA the barrier is an identity."""
    gen_xla_ops = tf_internal("compiler.tf2xla.ops.gen_xla_ops")

    return gen_xla_ops.xla_optimization_barrier([keep])[0]


def _prepare(tf_random: Any, inputs: Any, noise_shape: Any, seed: Any) -> tuple[Any, Any, Any]:
    """(x, seed tensor, concrete noise shape), as Keras' own dropout derives them."""
    tf = import_tensorflow()
    x = tf.convert_to_tensor(inputs)
    seed = tf_random._cast_seed(tf_random.draw_seed(seed))
    noise_shape = tf_random._get_concrete_noise_shape(x, noise_shape)
    return x, seed, noise_shape


def _check_rate(rate: Any) -> float:
    value = float(rate)
    if not 0.0 <= value <= 1.0:
        raise InputError(
            "dropout rate out of range", expected="0 <= rate <= 1", received=str(value)
        )
    return value


def _masked(
    inputs: Any, rate: Any, noise_shape: Any, seed: Any, keep_of: Callable[..., Any]
) -> Any:
    """Dropout as Keras does it (rate 0 and 1 short-cut, kept elements scaled by
    1/(1-rate)), with the keep-mask from `keep_of(tf, x, noise_shape, seed, rate)`,
    materialized once (`_kept`)."""
    tf = import_tensorflow()
    rate = _check_rate(rate)
    if rate == 1.0:
        return tf.zeros_like(inputs)
    if rate == 0.0:
        return inputs
    x, seed, noise_shape = _prepare(_keras_random(), inputs, noise_shape, seed)
    keep = _kept(keep_of(tf, x, noise_shape, seed, rate))
    scaled = x * tf.constant(1.0 / (1.0 - rate), x.dtype)
    return tf.where(keep, scaled, tf.zeros([], x.dtype))


def keras_keep(tf: Any, x: Any, noise_shape: Any, seed: Any, rate: float) -> Any:
    """Keras' keep-mask, as `tf.nn.experimental.stateless_dropout` draws it: a uniform of
    x's dtype from the seed (TensorFlow's auto-selected algorithm), kept where >= rate."""
    uniform = tf.random.stateless_uniform(noise_shape, seed=seed, dtype=x.dtype)
    return uniform >= tf.constant(rate, x.dtype)


def mask_once_dropout(inputs: Any, rate: Any, noise_shape: Any = None, seed: Any = None) -> Any:
    """Keras' dropout, the same mask bit for bit, with the keep-mask materialized once."""
    return _masked(inputs, rate, noise_shape, seed, keras_keep)


def philox16_keep(tf: Any, noise_shape: Any, seed: Any, rate: float) -> Any:
    """The keep-mask of `noise_shape` (a shape tensor or a list of sizes) from 16-bit
    random numbers, two per Philox word: the low halves of the words for the first half
    of the last axis, the high halves for the rest."""
    shape = tf.reshape(tf.cast(tf.convert_to_tensor(noise_shape), tf.int32), [-1])
    rank = shape.shape[0]
    if rank == 0:  # a scalar: one word
        shape = tf.ones([1], tf.int32)
    last = shape[-1]
    half = (last + 1) // 2
    words = tf.random.stateless_uniform(
        tf.concat([shape[:-1], [half]], 0),
        seed=seed,
        minval=None,
        maxval=None,
        dtype=tf.uint32,
        alg="philox",
    )
    low = tf.bitwise.bitwise_and(words, tf.constant(0xFFFF, tf.uint32))
    high = tf.bitwise.right_shift(words, tf.constant(16, tf.uint32))
    r16 = tf.concat([low, high], axis=-1)
    static_last = tf.get_static_value(last)
    if static_last is None or static_last % 2:
        r16 = r16[..., :last]  # an odd last axis: one high half unused
    if rank == 0:
        r16 = tf.reshape(r16, [])
    return r16 >= tf.constant(round(rate * 65536), tf.uint32)


def philox16_dropout(inputs: Any, rate: Any, noise_shape: Any = None, seed: Any = None) -> Any:
    """Dropout with two 16-bit random numbers per Philox word, the mask kept once."""
    return _masked(
        inputs,
        rate,
        noise_shape,
        seed,
        lambda tf, x, shape, s, r: philox16_keep(tf, shape, s, r),
    )


# Each name: (its function, None for Keras' own; the configure report's description).
_KINDS: dict[str, tuple[Callable[..., Any] | None, str]] = {
    "keras": (None, "Keras' own (Philox, 32 random bits an element, recomputed under XLA)"),
    "mask_once": (
        mask_once_dropout,
        "Keras' masks bit for bit, computed once and kept for the backward pass",
    ),
    "philox16": (
        philox16_dropout,
        "two 16-bit random numbers per Philox word, the mask kept for the backward pass "
        "(another random stream)",
    ),
}

_PATCH = BackendPatch(
    "dropout",
    "random",
    "dropout",
    ("draw_seed", "_cast_seed", "_get_concrete_noise_shape"),
    _KINDS,
)


def set_dropout(name: str) -> str:
    """Make Keras' dropout (every `keras.layers.Dropout`, KerasHub's attention dropout,
    `keras.random.dropout`) use `name`; returns a one-line description. Layers look the
    function up at each call, so models built before or after alike use it."""
    return _PATCH.set(name)


def current_dropout() -> str:
    """The name of the dropout in use ("keras" when tfaccel never changed it)."""
    return _PATCH.current()


def count_layers(layers: list[Any]) -> int:
    """How many of `layers` (a model's, nested ones included) drop something: Keras
    Dropout layers with a rate above 0, the ones this knob changes."""
    import keras

    return sum(1 for x in layers if isinstance(x, keras.layers.Dropout) and x.rate > 0)
