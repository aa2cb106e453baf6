"""tfaccel.optimize.einsum: projections' einsums as 2-D products, one GEMM per gradient."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import numpy as np
import pytest

pytest.importorskip("tensorflow")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras
import tensorflow as tf

from tfaccel.errors import InputError
from tfaccel.optimize import einsum
from tfaccel.optimize.settings import Settings


@pytest.fixture(autouse=True)
def keras_einsum_after() -> Iterator[None]:
    yield
    einsum.set_einsum("keras")


def _t(shape: tuple[int, ...], seed: int, dtype: tf.DType = tf.float32) -> tf.Tensor:
    return tf.cast(tf.random.stateless_normal(shape, seed=[seed, 1]), dtype)


# Each flattened equation with operand shapes: batch 3, 5 tokens.
SHAPES = {
    "abc,cd->abd": ((3, 5, 8), (8, 6)),
    "abc,dc->abd": ((3, 5, 8), (6, 8)),
    "abc,cde->abde": ((3, 5, 8), (8, 2, 4)),
    "abc,dce->abde": ((3, 5, 8), (2, 8, 4)),
    "abc,dec->abde": ((3, 5, 8), (2, 4, 8)),
    "abcd,cde->abe": ((3, 5, 2, 4), (2, 4, 6)),
    "abcd,ced->abe": ((3, 5, 2, 4), (2, 6, 4)),
    "abcd,ecd->abe": ((3, 5, 2, 4), (6, 2, 4)),
}


def test_every_flattened_equation_has_a_case() -> None:
    assert set(SHAPES) == set(einsum.FLAT_EQUATIONS)


@pytest.mark.parametrize("subscripts", sorted(SHAPES))
def test_flat_product_matches_einsum_and_its_gradients(subscripts: str) -> None:
    xs, ys = SHAPES[subscripts]
    x, y = _t(xs, 1), _t(ys, 2)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, y])
        want = tf.einsum(subscripts, x, y)
        got = einsum.flat_product(subscripts, x, y)
        assert got is not None
        dw = tf.reduce_sum(want * _t(want.shape, 3))
        dg = tf.reduce_sum(got * _t(want.shape, 3))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for a, b in zip(tape.gradient(dg, [x, y]), tape.gradient(dw, [x, y]), strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("subscripts", "x", "y"),
    [
        ("abcd,aecd->acbe", (2, 3, 4, 5), (2, 6, 4, 5)),  # attention's scores: batched
        ("abc,cde->abde", (3, 5, 8), (8, 2, 4)),  # int8: Keras' int32 path
        ("abc,cde->abde", (3, 5, 8), (7, 2, 4)),  # shapes that do not contract
    ],
)
def test_other_calls_are_not_flattened(
    subscripts: str, x: tuple[int, ...], y: tuple[int, ...]
) -> None:
    dtype = tf.int8 if x == (3, 5, 8) and y[0] == 8 else tf.float32
    assert einsum.flat_product(subscripts, _t(x, 1, dtype), _t(y, 2, dtype)) is None
    # mixed dtypes: Keras' result-type rules
    xf, yb = _t((3, 5, 8), 1), _t((8, 2, 4), 2, tf.bfloat16)
    assert einsum.flat_product("abc,cde->abde", xf, yb) is None


def _projection_grads(
    name: str,
    jit: bool,
    shape: tuple[int, int, int, int, int] = (6, 7, 16, 4, 8),
    dtype: str = "float32",
    stage: str = "hlo",
) -> tuple[np.ndarray, list[np.ndarray], str]:
    """An EinsumDense query projection (BERT's equation) of `shape` (batch, tokens,
    width, heads, head size), forward and its gradients, under `name`'s einsum; and the
    XLA program of the gradient step (jit only)."""
    batch, tokens, width, heads, size = shape
    einsum.set_einsum(name)
    keras.utils.set_random_seed(0)
    layer = keras.layers.EinsumDense(
        "abc,cde->abde", output_shape=(None, heads, size), bias_axes="de", dtype=dtype
    )
    x = _t((batch, tokens, width), 4, tf.as_dtype(dtype))
    layer(x)
    cot = _t((batch, tokens, heads, size), 5, tf.as_dtype(dtype))

    def step(x: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            loss = tf.reduce_sum(tf.cast(y * cot, tf.float32))
        return y, tape.gradient(loss, [x, *layer.trainable_variables])

    fn = tf.function(step, jit_compile=jit)
    y, grads = fn(x)
    hlo = fn.experimental_get_compiler_ir(x)(stage=stage) if jit else ""
    as_np = lambda t: np.asarray(tf.cast(t, tf.float32))  # noqa: E731
    return as_np(y), [as_np(g) for g in grads], hlo


@pytest.mark.parametrize("jit", [False, True])
def test_einsum_dense_trains_the_same_and_its_kernel_gradient_is_one_product(jit: bool) -> None:
    y0, g0, hlo0 = _projection_grads("keras", jit)
    y1, g1, hlo1 = _projection_grads("flat", jit)
    np.testing.assert_allclose(y1, y0, rtol=1e-5, atol=1e-5)
    for a, b in zip(g1, g0, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    if jit:
        # Keras' path: the kernel's gradient per batch element, f32[6,16,32], then a sum
        # over the batch; flattened: no such tensor.
        per_batch = re.compile(r"f32\[6,16,32\]")
        assert per_batch.search(hlo0)
        assert not per_batch.search(hlo1)


def test_a_mixed_precision_layer_takes_the_flat_path() -> None:
    """Under mixed_bfloat16 the kernel reaches einsum as a Keras variable read in bf16
    (autocast), the input as a bf16 tensor: still one product, no per-sequence kernel
    gradient in the compiled program."""
    einsum.set_einsum("flat")
    layer = keras.layers.EinsumDense(
        "abc,cde->abde", output_shape=(None, 4, 8), bias_axes="de", dtype="mixed_bfloat16"
    )
    x = _t((6, 7, 16), 4)
    layer(x)

    @tf.function(jit_compile=True)
    def step(x: tf.Tensor) -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.cast(layer(x), tf.float32))
        return tape.gradient(loss, layer.trainable_variables)

    grads = step(x)
    assert [g.dtype for g in grads] == [tf.float32, tf.float32]
    hlo = step.experimental_get_compiler_ir(x)(stage="hlo")
    assert not re.search(r"\[6,16,32\]", hlo)
    einsum.set_einsum("keras")  # the same step traced again with Keras' einsum: it is there
    keras_step = tf.function(step.python_function, jit_compile=True)
    assert re.search(r"\[6,16,32\]", keras_step.experimental_get_compiler_ir(x)(stage="hlo"))


@pytest.mark.gpu
def test_flat_einsum_on_the_gpu_at_berts_projection() -> None:
    """On the GPU, bf16 under XLA, BERT-base's query projection at batch 64: outputs and
    gradients within bf16 rounding of Keras' (cuBLAS may pick other algorithms for the
    2-D product), and no per-sequence kernel gradient ([64, 768, 768]) left in XLA's
    optimized program."""
    shape = (64, 128, 768, 12, 64)
    with tf.device("/GPU:0"):
        y0, g0, hlo0 = _projection_grads("keras", True, shape, "bfloat16", "optimized_hlo")
        y1, g1, hlo1 = _projection_grads("flat", True, shape, "bfloat16", "optimized_hlo")
    for a, b in zip([y1, *g1], [y0, *g0], strict=True):
        scale = float(np.abs(b).max())
        assert float(np.abs(a - b).max()) <= 0.02 * scale
    per_batch = re.compile(r"\[64,768,768\]")
    assert per_batch.search(hlo0)
    assert not per_batch.search(hlo1)


def test_set_einsum_patches_keras_ops_and_restores() -> None:
    assert einsum.current_einsum() == "keras"
    assert "2-D GEMMs" in einsum.set_einsum("flat")
    assert einsum.current_einsum() == "flat"
    x, y = _t((3, 5, 8), 1), _t((8, 2, 4), 2)
    np.testing.assert_allclose(
        keras.ops.einsum("abc,cde->abde", x, y), tf.einsum("abc,cde->abde", x, y), rtol=1e-5
    )
    # a call it does not flatten goes to Keras' own, extra operands too
    z = keras.ops.einsum("ab,bc,cd->ad", _t((2, 3), 1), _t((3, 4), 2), _t((4, 5), 3))
    assert tuple(z.shape) == (2, 5)
    einsum.set_einsum("keras")
    assert einsum.current_einsum() == "keras"
    with pytest.raises(InputError, match="unknown einsum"):
        einsum.set_einsum("fast")


def test_configure_applies_einsum_and_reset_restores() -> None:
    from tfaccel.optimize.apply import configure

    report = configure(Settings(einsum="flat"))
    rows = [r for r in report.rows if r.knob == "einsum"]
    assert rows and rows[0].value == "flat" and rows[0].status == "applied"
    assert einsum.current_einsum() == "flat"
    configure.reset()
    assert einsum.current_einsum() == "keras"
    with pytest.raises(InputError, match="einsum"):
        Settings(einsum="fast")


def test_the_knobs_patches_know_the_settings_names() -> None:
    from tfaccel.optimize import dropout
    from tfaccel.optimize.settings import DROPOUTS, EINSUMS

    assert tuple(einsum._PATCH.kinds) == EINSUMS
    assert tuple(dropout._PATCH.kinds) == DROPOUTS


def _tiny_gpt2(name: str) -> tuple[np.ndarray, np.ndarray]:
    """A 2-layer KerasHub GPT-2 (cached attention, EinsumDense projections) under
    `name`'s einsum: logits of a batch, and greedy tokens from its generate()."""
    keras_hub = pytest.importorskip("keras_hub")
    einsum.set_einsum(name)
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=100,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=32,
    )
    lm = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    ids = np.random.RandomState(0).randint(1, 100, (2, 16)).astype("int32")
    logits = lm({"token_ids": ids, "padding_mask": np.ones_like(ids)})
    lm.compile(sampler="greedy")
    prompt = {
        "token_ids": np.where(np.arange(16) < 6, ids, 0).astype("int32"),
        "padding_mask": np.broadcast_to(np.arange(16) < 6, (2, 16)).astype("int32"),
    }
    out = lm.generate(prompt, max_length=16, stop_token_ids=None)
    return np.asarray(logits), np.asarray(out["token_ids"])


def test_kerashub_gpt2_predicts_and_generates_the_same() -> None:
    """KerasHub's cached attention (a one-token step under XLA in generate) through the
    flat einsum: the same logits, the same greedy tokens."""
    logits0, tokens0 = _tiny_gpt2("keras")
    logits1, tokens1 = _tiny_gpt2("flat")
    np.testing.assert_allclose(logits1, logits0, rtol=1e-5, atol=1e-5)
    assert np.array_equal(tokens1, tokens0)


def test_float8_layers_train_the_same_with_the_flat_einsum() -> None:
    """Keras' float8 EinsumDense (quantize-dequantize, its own gradient) under the
    flat einsum: one training step under XLA, the same loss."""

    def loss(name: str) -> float:
        einsum.set_einsum(name)
        keras.utils.set_random_seed(0)
        layer = keras.layers.EinsumDense("abc,cde->abde", (8, 4, 4))
        model = keras.Sequential([keras.Input((8, 16)), layer])
        layer.quantize("float8")
        model.compile("adam", "mse", jit_compile=True)
        x = np.random.RandomState(1).normal(size=(4, 8, 16)).astype("float32")
        history = model.fit(x, np.zeros((4, 8, 4, 4), "float32"), epochs=2, verbose=0)
        return float(history.history["loss"][-1])

    assert loss("flat") == pytest.approx(loss("keras"), rel=1e-6)
