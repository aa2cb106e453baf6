"""tfaccel.optimize.attention: Keras' MultiHeadAttention through cuDNN's flash attention.

The CPU cannot run cuDNN's custom calls, so these tests check what reaches XLA: the
calls, their backend config, and where Keras' own attention stays. The GPU tests check
the numbers against Keras' attention, and watch cuDNN's dropout crash TF 2.21."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.fakes import needs_keras_for

pytest.importorskip("tensorflow")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras
import tensorflow as tf

from tfaccel.errors import InputError
from tfaccel.optimize import attention
from tfaccel.optimize.settings import Settings

pytestmark = needs_keras_for("attention", "cudnn")


@pytest.fixture
def cudnn() -> Iterator[None]:
    """cuDNN's attention patched in (as configure does on a GPU of 8.0+), bf16 policy."""
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    attention.set_attention("cudnn")
    try:
        yield
    finally:
        attention.set_attention("keras")
        keras.mixed_precision.set_global_policy("float32")


def _model(key_dim: int = 16, layers: int = 2, dropout: float = 0.1) -> keras.Model:
    x = keras.Input((8, 32))
    mask = keras.Input((8, 8), dtype="bool")
    h = x
    for i in range(layers):
        mha = keras.layers.MultiHeadAttention(2, key_dim, dropout=dropout, name=f"mha{i}")
        h = mha(h, h, attention_mask=mask)
    return keras.Model([x, mask], h)


def _inputs() -> tuple[tf.Tensor, tf.Tensor]:
    x = tf.random.stateless_normal((4, 8, 32), seed=(1, 2))
    lengths = tf.constant([8, 6, 5, 8])
    mask = tf.sequence_mask(lengths, 8)[:, None, :] & tf.ones((4, 8, 1), tf.bool)
    return x, mask


def _grad_hlo(model: keras.Model, forward: Any, *inputs: Any) -> str:
    """XLA's HLO (before optimization) of the gradient of sum(forward(*inputs)) with
    respect to `model`'s weights, under jit_compile."""

    def step(*inputs: Any) -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.cast(forward(*inputs), tf.float32))
        return tape.gradient(loss, model.trainable_variables)  # type: ignore[no-any-return]

    f = tf.function(step, jit_compile=True)
    return str(f.experimental_get_compiler_ir(*inputs)(stage="hlo"))


def _train_hlo(model: keras.Model, training: bool = True) -> str:
    return _grad_hlo(model, lambda x, m: model([x, m], training=training), *_inputs())


def _configs(hlo: str) -> list[dict[str, object]]:
    found = re.findall(r"backend_config=(\{\"operation_queue_id.*?\}\})(?:,|$|\n)", hlo)
    return [json.loads(c)["cudnn_fmha_backend_config"] for c in found]


def test_training_under_xla_reaches_cudnns_calls(cudnn: None) -> None:
    """Layers without dropout: forward and backward through cuDNN, the mask as a bias.
    Layers with dropout: Keras' attention in training (cuDNN's dropout crashes TF 2.21)."""
    hlo = _train_hlo(_model(dropout=0.0))
    targets = re.findall(r'custom_call_target="([^"]+)"', hlo)
    assert (
        sorted(targets)
        == ["__cudnn$fmhaScaleBiasSoftmax"] * 2 + ["__cudnn$fmhaScaleBiasSoftmaxBackward"] * 2
    )
    configs = _configs(hlo)
    assert len(configs) == 4
    assert {c["dropout_rate"] for c in configs} == {0.0}
    assert {c["fmha_scale"] for c in configs} == {0.25}  # 1 / sqrt(key_dim 16)
    assert all(c["is_flash_attention"] for c in configs)
    shape = configs[0]["intermediate_tensor_shape"]
    assert isinstance(shape, dict) and shape["dimensions"] == ["4", "2", "8", "8"]
    assert "__cudnn$fmha" not in _train_hlo(_model(dropout=0.1))


def test_kerashub_bert_reaches_cudnns_calls(cudnn: None) -> None:
    """KerasHub's encoder layers build Keras' MultiHeadAttention: each layer's attention
    and its padding mask go to cuDNN, in training where the model has no dropout, in
    inference where it has."""
    keras_hub = pytest.importorskip("keras_hub")

    def backbone(dropout: float) -> Any:
        return keras_hub.models.BertBackbone(
            vocabulary_size=100,
            num_layers=2,
            num_heads=2,
            hidden_dim=64,
            intermediate_dim=128,
            max_sequence_length=16,
            dropout=dropout,
        )

    x = {
        "token_ids": tf.ones((2, 16), tf.int32),
        "segment_ids": tf.zeros((2, 16), tf.int32),
        "padding_mask": tf.sequence_mask([16, 10], 16),
    }

    def targets(bb: Any, training: bool) -> list[str]:
        hlo = _grad_hlo(bb, lambda x: bb(x, training=training)["sequence_output"], x)
        return sorted(re.findall(r'custom_call_target="([^"]+)"', hlo))

    both = ["__cudnn$fmhaScaleBiasSoftmax"] * 2 + ["__cudnn$fmhaScaleBiasSoftmaxBackward"] * 2
    assert targets(backbone(0.0), training=True) == both
    bert = backbone(0.1)
    assert targets(bert, training=True) == []
    assert targets(bert, training=False) == both


def test_a_tensor_training_flag_keeps_keras_attention_where_it_drops_out(cudnn: None) -> None:
    """training as a tensor may be true: a layer with dropout keeps Keras' attention."""
    mha = keras.layers.MultiHeadAttention(2, 16, dropout=0.1)
    x = tf.zeros((2, 8, 32))
    mha(x, x)
    q = tf.cast(tf.random.stateless_normal((2, 8, 2, 16), seed=(1, 2)), tf.bfloat16)

    def hlo(training: Any) -> str:
        f = tf.function(
            lambda q: mha._compute_attention(q, q, q, training=training)[0], jit_compile=True
        )
        return str(f.experimental_get_compiler_ir(q)(stage="hlo"))

    assert "__cudnn$fmha" not in hlo(tf.constant(True))
    assert "__cudnn$fmhaSoftmax" in hlo(False)


def test_flash_attention_emits_cudnns_dropout_when_asked(cudnn: None) -> None:
    """flash_attention's own dropout (the probe's and the GPU test's): the forward and
    backward calls carry the rate and the seed."""
    q = tf.cast(tf.random.stateless_normal((2, 2, 8, 16), seed=(1, 2)), tf.bfloat16)

    def step(q: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            tape.watch(q)
            out = attention.flash_attention(q, q, q, dropout=0.1, seed=5)
            loss = tf.reduce_sum(tf.cast(out, tf.float32))
        return tape.gradient(loss, q)

    hlo = str(tf.function(step, jit_compile=True).experimental_get_compiler_ir(q)(stage="hlo"))
    targets = re.findall(r'custom_call_target="([^"]+)"', hlo)
    assert targets == ["__cudnn$fmhaSoftmaxDropout", "__cudnn$fmhaSoftmaxDropoutBackward"]
    assert {(c["dropout_rate"], c["seed"]) for c in _configs(hlo)} == {(0.1, 5)}


def test_inference_drops_nothing(cudnn: None) -> None:
    model = _model(layers=1)
    f = tf.function(lambda x, m: model([x, m], training=False), jit_compile=True)
    hlo = str(f.experimental_get_compiler_ir(*_inputs())(stage="hlo"))
    assert re.findall(r'custom_call_target="([^"]+)"', hlo) == ["__cudnn$fmhaScaleBiasSoftmax"]


@pytest.mark.parametrize(
    ("key_dim", "policy"),
    [(12, "mixed_bfloat16"), (136, "mixed_bfloat16"), (16, "float32")],
)
def test_heads_cudnn_cannot_take_stay_with_keras(cudnn: None, key_dim: int, policy: str) -> None:
    keras.mixed_precision.set_global_policy(policy)
    assert "__cudnn$" not in _train_hlo(_model(key_dim=key_dim, layers=1))


def test_outside_xla_keras_own_attention_runs(cudnn: None) -> None:
    """Eager calls and tf.functions without jit_compile have no kernel for the custom
    calls: there Keras' own code runs, and gives Keras' numbers."""
    model = _model(layers=1, dropout=0.0)
    x, mask = _inputs()
    patched = model([x, mask]).numpy()
    graph = tf.function(lambda x, m: model([x, m]))(x, mask).numpy()
    attention.set_attention("keras")
    own = model([x, mask]).numpy()
    np.testing.assert_array_equal(patched, own)
    np.testing.assert_array_equal(graph, own)


def test_configure_without_a_gpu_keeps_keras_attention() -> None:
    import tfaccel

    report = tfaccel.configure(attention="cudnn", precision="mixed_bfloat16", xla="jit")
    try:
        row = next(r for r in report.rows if r.knob == "attention")
        assert row.status == "warning" and "needs 8.0+" in row.detail
        assert attention.current_attention() == "keras"
    finally:
        tfaccel.configure.reset()


def test_set_attention_and_reset_restore_keras() -> None:
    from keras.src.layers.attention.multi_head_attention import MultiHeadAttention

    import tfaccel

    own = MultiHeadAttention._compute_attention
    assert "flash attention" in attention.set_attention("cudnn")
    assert attention.current_attention() == "cudnn"
    assert MultiHeadAttention._compute_attention is not own
    tfaccel.configure.reset()
    assert attention.current_attention() == "keras"
    assert MultiHeadAttention._compute_attention is own


def test_bad_names_are_clear_errors() -> None:
    with pytest.raises(InputError, match="attention"):
        Settings(attention="flash")
    with pytest.raises(InputError, match="unknown attention"):
        attention.set_attention("flash")


def test_backend_config_dimension_numbers() -> None:
    fwd = json.loads(
        attention.backend_config((2, 12, 128, 64), 128, "bfloat16", 0.125, 0.1, 3, False)
    )
    bwd = json.loads(
        attention.backend_config((2, 12, 128, 64), 128, "bfloat16", 0.125, 0.1, 3, True)
    )
    f, b = fwd["cudnn_fmha_backend_config"], bwd["cudnn_fmha_backend_config"]
    assert f["bmm1_dot_dimension_numbers"]["lhs_contracting_dimensions"] == ["3"]
    assert f["bmm2_dot_dimension_numbers"]["rhs_contracting_dimensions"] == ["2"]
    assert "bmm1_grad_gemm1_dot_dimension_numbers" in b and "bmm1_dot_dimension_numbers" not in b
    assert f["intermediate_tensor_shape"]["dimensions"] == ["2", "12", "128", "128"]
    assert (f["seed"], f["dropout_rate"], f["mask_type"]) == (3, 0.1, "NO_MASK")


@pytest.mark.gpu
def test_cudnn_attention_matches_keras_on_the_gpu() -> None:
    """Without dropout, cuDNN's attention and Keras' agree within bf16 rounding, forward
    and backward, BERT-base's head size, a padding mask."""
    from tfaccel.hardware.nvml import driver_info

    cc = getattr(driver_info().gpus[0], "compute_capability", None)
    if not attention.flash_capable(cc):
        pytest.skip(f"compute capability {cc}: no flash attention")
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = _model(key_dim=64, layers=1, dropout=0.0)

        def step(x: tf.Tensor, mask: tf.Tensor) -> list[tf.Tensor]:
            with tf.GradientTape() as tape:
                out = model([x, mask], training=True)
                loss = tf.reduce_sum(tf.cast(out, tf.float32) ** 2)
            return [out, *tape.gradient(loss, model.trainable_variables)]

        x, mask = _inputs()
        own = [t.numpy().astype("float32") for t in tf.function(step, jit_compile=True)(x, mask)]
        attention.set_attention("cudnn")
        hlo = tf.function(step, jit_compile=True).experimental_get_compiler_ir(x, mask)(
            stage="optimized_hlo"
        )
        assert "__cudnn$fmha" in hlo
        ours = [t.numpy().astype("float32") for t in tf.function(step, jit_compile=True)(x, mask)]
    finally:
        attention.set_attention("keras")
        keras.mixed_precision.set_global_policy("float32")
    # The key projection's bias gradient is zero in exact arithmetic (a constant added to
    # every score of a row leaves its softmax as it is): both runs hold rounding noise
    # there (lease K: 0.004 and 0.008), so each tensor is held to a scale of at least a
    # hundredth of the largest gradient's, not to its own noise.
    floor = 0.01 * max(float(np.abs(b).max()) for b in own[1:])
    for i, (a, b) in enumerate(zip(ours, own, strict=True)):
        scale = max(float(np.abs(b).max()), 0.0 if i == 0 else floor) or 1.0
        assert float(np.abs(a - b).max()) / scale < 0.05, (i, float(np.abs(b).max()))


# Dropout inside cuDNN's kernels at BERT-base's head shapes, one compiled step run twice:
# prints {"plain": ..., "gaps": [...], "differ": ...}, where a gap is
# |<out, dO> - <v, dv>| / |<out, dO>| (out = A v for the dropped-out probabilities A, so
# dv = A^T dO: rounding only if the backward call drops what the forward call dropped),
# "plain" that gap without dropout, and "differ" whether the two runs drew other masks.
DROPOUT_CASE = """
import json
import tensorflow as tf
from tfaccel.optimize import attention

def gaps(dropout, runs):
    g = tf.random.Generator.from_seed(3)
    q, k, v, d_out = (tf.cast(g.normal((4, 12, 128, 64)), tf.bfloat16) for _ in range(4))

    @tf.function(jit_compile=True)
    def step(q, k, v):
        with tf.GradientTape() as tape:
            tape.watch(v)
            out = attention.flash_attention(q, k, v, dropout=dropout, seed=7)
        return out, tape.gradient(out, v, output_gradients=d_out)

    found = []
    for _ in range(runs):
        out, dv = step(q, k, v)
        a, d, b, db = (tf.cast(x, tf.float32) for x in (out, d_out, v, dv))
        lhs, rhs = float(tf.reduce_sum(a * d)), float(tf.reduce_sum(b * db))
        found.append((abs(lhs - rhs) / abs(lhs), out))
    return found

[(plain, _)] = gaps(0.0, 1)
(g1, first), (g2, second) = gaps(0.1, 2)
print(json.dumps({"plain": plain, "gaps": [g1, g2],
                  "differ": bool(tf.reduce_any(first != second))}))
"""


@pytest.mark.gpu
def test_cudnn_dropout_still_crashes_on_the_gpu(tmp_path: Any) -> None:
    """Why training calls with dropout stay on Keras' attention: with TF 2.21, cuDNN's
    dropout crashes the process at its first execution (leases J and K, through PjRt as
    well). Run in a child process. Should a TensorFlow release fix it, this fails with
    what the child found; lift the fallback in `_cudnn_compute_attention` once it shows
    a new mask each execution ("differ") and gaps as small as "plain" (the backward
    dropping what the forward dropped)."""
    import subprocess
    import sys

    from tfaccel.hardware.nvml import driver_info

    cc = getattr(driver_info().gpus[0], "compute_capability", None)
    if not attention.flash_capable(cc):
        pytest.skip(f"compute capability {cc}: no flash attention")
    script = tmp_path / "case.py"
    script.write_text(DROPOUT_CASE)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode != 0, f"cuDNN's dropout ran: {proc.stdout.strip()[-500:]}"
