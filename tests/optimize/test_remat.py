"""Gradient checkpointing with keyword arguments (training=, tensors) in graph mode."""

from __future__ import annotations

import numpy as np
import pytest

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

from tfaccel.optimize import remat  # noqa: E402


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


def test_a_kerashub_bert_gets_the_same_gradients_with_checkpointing():
    """Dropout, masks, the pooled output's slice: what broke BERT, in a small one."""
    keras_hub = pytest.importorskip("keras_hub")

    def bert():
        return keras_hub.models.BertBackbone(
            vocabulary_size=100,
            num_layers=2,
            num_heads=2,
            hidden_dim=16,
            intermediate_dim=32,
            max_sequence_length=16,
            dropout=0.3,
        )

    plain, checkpointed = _twins(bert)
    rng = np.random.default_rng(0)
    x = {
        "token_ids": rng.integers(1, 100, (2, 16)).astype("int32"),
        "segment_ids": np.zeros((2, 16), "int32"),
        "padding_mask": np.ones((2, 16), "bool"),
    }

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
