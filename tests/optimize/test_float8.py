"""tfaccel.optimize.float8: Keras' float8 quantization of a model's matrix products."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from tests.fakes import needs_keras_for

pytest.importorskip("tensorflow")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras

from tfaccel.errors import InputError
from tfaccel.optimize.float8 import fp8_capable, quantizable, quantize_float8
from tfaccel.optimize.settings import Settings

pytestmark = needs_keras_for("float8", True)


def _model() -> keras.Model:
    """Dense and EinsumDense layers of FP8-sized kernels, and a 2-class head."""
    x = keras.Input((16, 64))
    h = keras.layers.EinsumDense("abc,cde->abde", (16, 8, 8), name="heads")(x)
    h = keras.layers.Reshape((16, 64))(h)
    h = keras.layers.Dense(128, activation="gelu", name="ffn")(h)
    h = keras.layers.GlobalAveragePooling1D()(h)
    return keras.Model(x, keras.layers.Dense(2, name="head")(h))


def test_fp8_capability() -> None:
    assert fp8_capable("9.0") and fp8_capable("8.9") and fp8_capable("10.0")
    assert not fp8_capable("8.6") and not fp8_capable(None) and not fp8_capable("x")


def test_the_matrix_products_are_quantized_and_the_head_is_not() -> None:
    model = _model()
    assert quantize_float8(model) == ["heads", "ffn"]
    head = model.get_layer("head")
    assert not quantizable(head) and getattr(head, "quantization_mode", None) is None
    assert quantize_float8(model) == ["heads", "ffn"]  # a second call changes nothing


def test_unbuilt_or_wrong_models_get_a_clear_error() -> None:
    class Sub(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.d = keras.layers.Dense(32)

        def call(self, x: object) -> object:
            return self.d(x)

    with pytest.raises(InputError, match="built model"):
        quantize_float8(Sub())
    with pytest.raises(InputError, match="Keras model"):
        quantize_float8("resnet50")
    with pytest.raises(InputError, match="float8"):
        Settings(float8="yes")  # type: ignore[arg-type]


def test_a_model_that_holds_built_models_is_quantized_through_them() -> None:
    """A GAN's model (keras-io's WGAN-GP: a train_step of its own, no call) is never
    built itself; the models it holds are, and their matrix products are quantized."""

    class Gan(keras.Model):
        def __init__(self, generator: keras.Model) -> None:
            super().__init__()
            self.generator = generator

    gan = Gan(_model())
    assert not gan.built
    assert sorted(quantize_float8(gan)) == ["ffn", "heads"]


def test_configure_quantizes_at_compile_and_the_model_trains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the CPU: a warning row (no FP8 tensor cores), and the quantized model trains
    under XLA with finite losses that fall."""
    import tfaccel

    # The XLA flag float8 implies, as if set before TensorFlow started (other tests of
    # this process may have started it; test_configure covers setting it).
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_enable_triton_gemm=false")
    report = tfaccel.configure(float8=True, precision="float32", xla="jit")
    try:
        row = next(r for r in report.rows if r.knob == "float8")
        assert row.status == "warning" and "no FP8 tensor cores" in row.detail
        model = _model()
        report.compile(model, optimizer=keras.optimizers.Adam(1e-2), loss="mse")
        assert report.float8_layers == ["heads", "ffn"]
        rng = np.random.default_rng(0)
        x = rng.normal(size=(64, 16, 64)).astype("float32")
        y = x.mean(axis=(1, 2))[:, None].repeat(2, axis=1)
        losses = model.fit(x, y, batch_size=16, epochs=4, verbose=0).history["loss"]
        assert all(np.isfinite(losses)) and losses[-1] < losses[0]
        # the scales moved from their initial 1.0 (the amax history is in use)
        scales = [float(v.numpy()) for v in model.get_layer("ffn").variables if "scale" in v.path]
        assert scales and any(s != 1.0 for s in scales)
    finally:
        tfaccel.configure.reset()
    # the setting round-trips through tune's file
    path = tmp_path / "tfaccel.json"
    path.write_text(json.dumps(Settings(float8=True).to_dict()))
    from tfaccel.optimize.settings import read_settings_file

    assert read_settings_file(path).float8 is True


@pytest.mark.gpu
def test_float8_products_become_fp8_gemms_under_xla_on_the_gpu(tmp_path: Path) -> None:
    """On FP8 tensor cores, with configure's float8 (which turns XLA's Triton GEMMs off),
    XLA turns a quantized Dense's product into cuBLASLt's FP8 GEMM. A fresh process:
    XLA reads its flags once."""
    from tests.optimize.test_configure import run_py
    from tfaccel.hardware.nvml import driver_info

    gpu = driver_info().gpus[0]
    cc = getattr(gpu, "compute_capability", None)
    if not fp8_capable(cc):
        pytest.skip(f"compute capability {cc}: no FP8 tensor cores")
    out = run_py(
        """
        import json
        import tfaccel
        tfaccel.configure(float8=True, xla="jit", precision="mixed_bfloat16")
        import keras, tensorflow as tf
        from tfaccel.optimize.float8 import quantize_float8
        x = keras.Input((256,))
        model = keras.Model(x, keras.layers.Dense(256, name="d")(x))
        quantize_float8(model)
        f = tf.function(lambda t: model(t, training=True), jit_compile=True)
        hlo = f.experimental_get_compiler_ir(tf.ones((256, 256)))(stage="optimized_hlo")
        print(json.dumps({"fp8_gemm": "__cublas$lt$matmul$f8" in hlo, "tail": hlo[-3000:]}))
    """,
        tmp_path,
    )
    assert out["fp8_gemm"] is True, out["tail"]


@pytest.mark.filterwarnings("ignore:Layer InputLayer does not have")
def test_float8_trains_in_a_tf_function_not_under_an_eager_tape() -> None:
    """Keras' own float8 layers (plain `quantize("float8")`, no tfaccel) give gradients
    inside a tf.function and fail under an eager tape: the docs' configure page says so.
    When Keras fixes the eager path this test fails, and the docs' note goes."""
    import tensorflow as tf

    inp = keras.Input((64,))
    model = keras.Model(inp, keras.layers.Dense(16)(keras.layers.Dense(64)(inp)))
    model.quantize("float8")
    x = np.random.default_rng(0).random((8, 64), dtype=np.float32)

    def grads() -> list:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x, training=True))
        return tape.gradient(loss, model.trainable_variables)

    assert all(g is not None for g in tf.function(grads)()[:2])
    with pytest.raises(ValueError, match="too many values to unpack"):
        grads()
