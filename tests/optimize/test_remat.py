"""Gradient checkpointing with keyword arguments (training=, tensors) in graph mode."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fakes import needs_keras_for

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

from tfaccel.optimize import remat  # noqa: E402

pytestmark = needs_keras_for("gradient_checkpointing", True)


class Scale(keras.layers.Layer):
    """Multiplies by `by`, a tensor passed as a keyword: its gradient must survive."""

    def call(self, x, by=None, training=None):
        return x * by if training else x


def _bn_model() -> keras.Model:
    inputs = keras.Input((8,))
    x = keras.layers.Dense(16)(inputs)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.Dropout(0.0)(x)
    return keras.Model(inputs, keras.layers.Dense(1)(x))


def _twins(build):
    """The model built twice, the second inside a RematScope, with the same weights and
    the same dropout seeds (Keras draws a layer's seed when it is built)."""
    keras.utils.set_random_seed(0)
    plain = build()
    remat.install()
    assert remat.install()  # once per process
    keras.utils.set_random_seed(0)
    with keras.RematScope(mode="full"):
        checkpointed = build()
    checkpointed.set_weights(plain.get_weights())
    return plain, checkpointed


def test_keras_remat_alone_fails_on_training_keyword_in_graph_mode():
    """The bug remat.install() works around, so that the test notices when Keras fixes it."""

    @tf.function
    def step(x):
        return tf.recompute_grad(lambda x, training=None: x * 2.0)(x, training=True)

    with pytest.raises(ValueError, match="keyword"):
        step(tf.ones((2,)))


def test_remat_binds_python_keywords_and_keeps_tensor_gradients():
    layer = Scale()
    f = remat.remat(layer.call)

    @tf.function
    def grads(x, by):
        with tf.GradientTape() as tape:
            tape.watch([x, by])
            y = tf.reduce_sum(f(x, by=by, training=True))
        return tape.gradient(y, [x, by])

    x, by = tf.constant([1.0, 2.0]), tf.constant([3.0, 4.0])
    gx, gby = grads(x, by)
    np.testing.assert_allclose(gx.numpy(), [3.0, 4.0])
    np.testing.assert_allclose(gby.numpy(), [1.0, 2.0])


def test_remat_scope_trains_a_batchnorm_model_with_the_same_gradients():
    plain, checkpointed = _twins(_bn_model)
    x = np.random.default_rng(0).random((4, 8)).astype("float32")

    @tf.function
    def grads(model):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x, training=True))
        return tape.gradient(loss, model.trainable_variables)

    for a, b in zip(grads(plain), grads(checkpointed), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_remat_binds_slices_and_keeps_gradients_of_nested_tensors():
    """GetItem (x[:, 0]) passes its slices positionally; Concatenate takes a list."""

    def pick(x, key):
        return x[key]

    def concat(xs, axis=0):
        return tf.concat(xs, axis=axis)

    @tf.function
    def grads(a, b):
        with tf.GradientTape() as tape:
            tape.watch([a, b])
            first = remat.remat(pick)(a, (slice(None), 0))
            joined = remat.remat(concat)([first, b], axis=0)
            y = tf.reduce_sum(joined * joined)
        return tape.gradient(y, [a, b])

    a, b = tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([5.0])
    ga, gb = grads(a, b)
    np.testing.assert_allclose(ga.numpy(), [[2.0, 0.0], [6.0, 0.0]])
    np.testing.assert_allclose(gb.numpy(), [10.0])


def test_remat_binds_masks_and_ids_which_have_no_gradient():
    def masked(x, mask=None, ids=None):
        return tf.where(mask, x, 0.0) + tf.cast(ids, x.dtype)

    @tf.function
    def grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = remat.remat(masked)(x, mask=tf.constant([True, False]), ids=tf.constant([1, 2]))
            y = tf.reduce_sum(y)
        return tape.gradient(y, x)

    np.testing.assert_allclose(grad(tf.constant([3.0, 4.0])).numpy(), [1.0, 0.0])


def _dropout_model() -> keras.Model:
    inputs = keras.Input((8,))
    x = keras.layers.Dense(64)(inputs)
    x = keras.layers.Dropout(0.5, seed=7)(x)
    x = keras.layers.Dense(32)(x)
    x = keras.layers.Dropout(0.5, seed=8)(x)
    return keras.Model(inputs, keras.layers.Dense(1)(x))


@pytest.mark.parametrize("jit", [False, True])
def test_recomputation_draws_the_same_dropout_masks(jit: bool):
    """Without replaying the seeds, the recomputed pass drops other units: the gradient
    is then of another network, and BERT's second loss read 1.21 instead of 0.65."""
    plain, checkpointed = _twins(_dropout_model)
    x = np.random.default_rng(1).random((4, 8)).astype("float32")

    def grads(model):
        @tf.function(jit_compile=jit)
        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x, training=True))
            return tape.gradient(loss, model.trainable_variables)

        return step()

    for _ in range(2):  # the seeds advance alike from step to step
        for a, b in zip(grads(plain), grads(checkpointed), strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def _small_bert(layers: int):
    keras_hub = pytest.importorskip("keras_hub")
    return keras_hub.models.BertBackbone(
        vocabulary_size=100,
        num_layers=layers,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=16,
        dropout=0.3,
    )


def _bert_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "token_ids": rng.integers(1, 100, (2, 16)).astype("int32"),
        "segment_ids": np.zeros((2, 16), "int32"),
        "padding_mask": np.ones((2, 16), "bool"),
    }


def test_a_kerashub_bert_gets_the_same_gradients_with_checkpointing():
    """Dropout, masks, the pooled output's slice: what broke BERT, in a small one."""
    plain, checkpointed = _twins(lambda: _small_bert(2))
    x = _bert_inputs()

    def grads(model):
        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x, training=True)["pooled_output"] ** 2)
            return tape.gradient(loss, model.trainable_variables)

        return step()

    for a, b in zip(grads(plain), grads(checkpointed), strict=True):
        a = tf.convert_to_tensor(a).numpy()  # the embeddings' gradients are sparse
        np.testing.assert_allclose(a, tf.convert_to_tensor(b).numpy(), rtol=1e-4, atol=1e-6)


def test_checkpointing_under_a_mixed_policy_recomputes_in_the_compute_dtype():
    """Keras casts float32 variables to bf16 only inside the layer's call; the
    recomputation runs in the backward pass, and failed with float32 vs bfloat16."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        plain, checkpointed = _twins(_dropout_model)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    x = np.random.default_rng(1).random((4, 8)).astype("float32")

    @tf.function
    def grads(model):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.cast(model(x, training=True), "float32"))
        return tape.gradient(loss, model.trainable_variables)

    for a, b in zip(grads(plain), grads(checkpointed), strict=True):
        assert b.dtype == tf.float32  # the variables' own dtype
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-2, atol=1e-3)


# Checkpointing by segments of a functional graph.


def _residual_net(blocks: int = 4, dropout: float = 0.0) -> keras.Model:
    """A small ResNet: single-operation layers, a shortcut around each block."""
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(8, 3, padding="same")(inputs)
    for _ in range(blocks):
        shortcut = x
        y = keras.layers.Conv2D(8, 3, padding="same")(x)
        y = keras.layers.BatchNormalization()(y)
        y = keras.layers.ReLU()(y)
        y = keras.layers.Dropout(dropout, seed=3)(y)
        y = keras.layers.Conv2D(8, 3, padding="same")(y)
        x = keras.layers.ReLU()(keras.layers.Add()([shortcut, y]))
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(3)(x))


def _same_gradients(plain, checkpointed, x, rtol=1e-5):
    def grads(model):
        @tf.function
        def step():
            with tf.GradientTape() as tape:
                out = model(x, training=True)
                out = out["pooled_output"] if isinstance(out, dict) else out
                loss = tf.reduce_sum(out**2)
            return loss, tape.gradient(loss, model.trainable_variables)

        return step()

    (la, ga), (lb, gb) = grads(plain), grads(checkpointed)
    np.testing.assert_allclose(float(la), float(lb), rtol=rtol)
    assert len(ga) == len(gb)
    for a, b in zip(ga, gb, strict=True):
        a, b = tf.convert_to_tensor(a).numpy(), tf.convert_to_tensor(b).numpy()
        np.testing.assert_allclose(a, b, rtol=rtol * 10, atol=1e-6)


def test_segments_cut_only_where_one_tensor_crosses():
    model = _residual_net(blocks=6)
    plan = remat.plan_segments(model)
    assert plan is not None and len(plan.segments) >= 2
    assert sum(plan.sizes) == plan.nodes  # every node in one segment
    by_id = {id(t): t for node in model._nodes_by_depth.values() for n in node for t in n.outputs}
    for seg in plan.segments[1:]:
        graph_inputs = [t for t in seg.inputs if t in by_id]
        assert len(graph_inputs) == 1  # never inside a block, where the shortcut crosses too
        producer = by_id[graph_inputs[0]]._keras_history.operation
        assert type(producer).__name__ in ("ReLU", "Conv2D", "Add")
    assert 0 < plan.kept < 0.6  # what the backward pass holds at once, estimated
    assert "segments of" in plan.describe()
    with pytest.raises(ValueError, match="2 or more"):
        remat.plan_segments(model, segments=1)
    assert len(remat.plan_segments(model, segments=2).segments) == 2


@pytest.mark.parametrize("jit", [False, True])
def test_a_checkpointed_graph_gets_the_same_loss_and_gradients(jit: bool):
    """Dropout inside recomputed segments draws the same masks (seeds replayed)."""
    keras.utils.set_random_seed(0)
    plain = _residual_net(dropout=0.3)
    keras.utils.set_random_seed(0)
    checkpointed = _residual_net(dropout=0.3)
    checkpointed.set_weights(plain.get_weights())
    plans = remat.checkpoint(checkpointed)
    assert len(plans) == 1 and plans[0].model == checkpointed.name
    assert remat.checkpoint(checkpointed)[0] is plans[0]  # once
    x = np.random.default_rng(0).random((2, 8, 8, 3)).astype("float32")
    if not jit:
        _same_gradients(plain, checkpointed, x)
    checkpointed.compile("sgd", "mse", jit_compile=jit)
    history = checkpointed.fit(x, np.zeros((2, 3)), epochs=2, verbose=0)
    assert all(np.isfinite(history.history["loss"]))
    # Called on symbolic tensors (inside another model), the graph runs as before.
    outer = keras.Model(checkpointed.inputs, checkpointed(checkpointed.inputs[0]))
    assert outer.output.shape == (None, 3)


def test_segments_replace_the_per_layer_recomputation_of_a_rematscope():
    remat.install()
    with keras.RematScope(mode="full"):
        model = _residual_net()
    assert model.layers[1]._remat_mode is not None
    assert remat.checkpoint(model)
    assert all(layer._remat_mode is None for layer in model._flatten_layers())


def test_a_kerashub_backbone_inside_a_task_model_is_cut_block_by_block():
    keras_hub = pytest.importorskip("keras_hub")
    keras.utils.set_random_seed(0)
    plain = _small_bert(4)
    keras.utils.set_random_seed(0)
    checkpointed = _small_bert(4)
    checkpointed.set_weights(plain.get_weights())
    plans = remat.checkpoint(checkpointed)
    assert len(plans) == 1
    # Transformer blocks keep far more than their output: a segment per block or so.
    assert len(plans[0].segments) >= 4
    _same_gradients(plain, checkpointed, _bert_inputs(), rtol=1e-4)

    task = keras_hub.models.GPT2CausalLM(
        backbone=keras_hub.models.GPT2Backbone(
            vocabulary_size=100,
            num_layers=4,
            num_heads=2,
            hidden_dim=16,
            intermediate_dim=32,
            max_sequence_length=16,
        ),
        preprocessor=None,
    )
    (plan,) = remat.checkpoint(task)
    assert plan.model == task.backbone.name  # the task's own graph is too small to cut


def test_models_without_a_graph_to_cut_are_left_alone():
    class Subclassed(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = [keras.layers.Dense(4) for _ in range(10)]

        def call(self, x):
            for d in self.dense:
                x = d(x)
            return x

    assert remat.checkpoint(Subclassed()) == []
    small = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    assert remat.checkpoint(small) == []
    # Two tensors cross everywhere (a dense net whose input feeds every layer): no cut.
    inputs = keras.Input((4,))
    x = inputs
    for _ in range(10):
        x = keras.layers.Dense(4)(keras.layers.Concatenate()([x, inputs]))
    wide = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Concatenate()([x, inputs])))
    assert remat.plan_segments(wide) is not None  # the model's input is bound, not a cut
    deep = keras.Sequential([keras.Input((4,)), *[keras.layers.Dense(4) for _ in range(12)]])
    x = np.ones((3, 4), "float32")
    before = np.asarray(deep(x))
    first = remat.checkpoint(deep)  # a Sequential's graph is cut too
    assert len(first) == 1 and len(first[0].segments) >= 2
    assert remat.checkpoint(deep) == first  # and only once
    with tf.GradientTape() as tape:
        out = deep(x, training=True)
    assert np.allclose(np.asarray(out), before, atol=1e-6)
    assert all(g is not None for g in tape.gradient(out, deep.trainable_variables))


@pytest.mark.gpu
def test_segments_lower_the_peak_memory_of_a_training_step_on_the_gpu() -> None:
    """A deep convolution stack, one training step compiled by tf.function (no XLA):
    the peak of TensorFlow's GPU allocator with segments is well below the peak of the
    same architecture without them, and the gradients are the same."""
    if not tf.config.list_physical_devices("GPU"):
        pytest.skip("needs a GPU")

    def build() -> keras.Model:
        keras.utils.set_random_seed(3)
        inputs = keras.Input((96, 96, 32))
        x = inputs
        for _ in range(24):
            x = keras.layers.Conv2D(32, 3, padding="same")(x)
            x = keras.layers.ReLU()(x)
        return keras.Model(inputs, keras.layers.GlobalAveragePooling2D()(x))

    x = tf.random.stateless_normal((64, 96, 96, 32), seed=(1, 2))

    def step_peak(model: keras.Model) -> tuple[int, list[np.ndarray]]:
        @tf.function
        def step(x: tf.Tensor) -> list[tf.Tensor]:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x, training=True)))
            return tape.gradient(loss, model.trainable_variables)

        step.get_concrete_function(x)  # traced before the peak is reset
        tf.config.experimental.reset_memory_stats("GPU:0")
        base = tf.config.experimental.get_memory_info("GPU:0")["current"]
        grads = step(x)
        peak = tf.config.experimental.get_memory_info("GPU:0")["peak"] - base
        return peak, [np.asarray(g) for g in grads]

    plain, plain_grads = step_peak(build())
    model = build()
    plans = remat.checkpoint(model)
    assert plans and len(plans[0].segments) >= 4
    cut, cut_grads = step_peak(model)
    # 24 activations of 75 MB each (x2 with ReLU) without segments; a few segments' worth.
    assert cut < 0.6 * plain, (cut, plain)
    for a, b in zip(plain_grads, cut_grads, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-2, atol=1e-4)  # TF32 convolutions
