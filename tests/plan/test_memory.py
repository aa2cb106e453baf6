"""The traced-step memory estimator, on real TensorFlow (CPU)."""

from __future__ import annotations

from typing import Any

import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from tfaccel.plan import memory as M  # noqa: E402
from tfaccel.workloads import Workload, load_workload  # noqa: E402


def test_live_curve_of_a_hand_computable_graph() -> None:
    n = 1000

    @tf.function
    def f(x):  # type: ignore[no-untyped-def]
        a = x * 2.0
        b = a + 1.0
        return tf.reduce_sum(b)

    cf = f.get_concrete_function(tf.TensorSpec([n], tf.float32))
    curve, saved, unknown = M.live_curve(cf.graph, cf.graph.outputs)
    # x and a live together, then a and b: never three vectors at once.
    assert 2 * n * 4 <= max(curve) <= 2 * n * 4 + 16
    assert saved == 0 and unknown == 0


def test_pareto_lines_drop_dominated_points() -> None:
    lines = M.pareto_lines([(10, 1), (5, 1), (1, 5), (0, 5), (3, 3), (2, 2)])
    assert lines == ((1, 5), (3, 3), (10, 1))
    assert max(f + v * 100 for f, v in lines) == 501


def _dense_workload() -> Workload:
    model = keras.Sequential([keras.Input((100,)), keras.layers.Dense(50), keras.layers.Dense(10)])
    return Workload(
        "dense", model, loss="mse", optimizer="adam", label_shape=(10,), label_dtype="float32"
    )


def test_dense_model_exact_sizes() -> None:
    est = M.estimate_memory(_dense_workload)
    params = 100 * 50 + 50 + 50 * 10 + 10
    assert est.parameters == params
    assert est.weights_bytes == params * 4
    assert est.gradients_bytes == params * 4
    # Adam keeps two float32 slots per weight plus a few scalars.
    assert 2 * params * 4 <= est.optimizer_bytes <= 2 * params * 4 + 64
    assert est.optimizer == "Adam"
    # The backward pass needs each MatMul's input: 100 + 50 floats per sample, plus the
    # small loss terms (10 floats) that MSE keeps.
    assert 600 <= est.activations_bytes_per_sample <= 600 + 3 * 40


def test_extrapolation_matches_a_direct_trace() -> None:
    est = M.estimate_memory(lambda: load_workload("tiny"), batches=(2, 4))
    wl = load_workload("tiny")
    direct = M.trace_step(wl.model, wl.loss, 16)
    assert est.step_bytes(16) == direct.peak_bytes


def test_mixed_precision_shrinks_activations_and_restores_the_policy() -> None:
    before = keras.mixed_precision.global_policy().name
    fp32 = M.estimate_memory(lambda: load_workload("tiny"), "float32")
    fp16 = M.estimate_memory(lambda: load_workload("tiny"), "mixed_float16")
    assert keras.mixed_precision.global_policy().name == before
    assert fp16.activations_bytes_per_sample < 0.75 * fp32.activations_bytes_per_sample
    assert fp16.weights_bytes == fp32.weights_bytes  # variables stay float32


def test_unknown_precision_is_an_input_error() -> None:
    from tfaccel.errors import InputError

    with pytest.raises(InputError, match="Unknown precision"):
        M.estimate_memory(_dense_workload, "fp8")


def test_max_batch_against_capacity() -> None:
    est = M.MemoryEstimate(
        "x",
        "float32",
        "Adam",
        1,
        1,
        weights_bytes=100,
        optimizer_bytes=200,
        gradients_bytes=100,
        step_lines=((1000, 10), (5000, 1)),
        activations_bytes_per_sample=8,
        traces=(),
    )
    assert est.peak_bytes(0) == 300 + 5000
    assert est.peak_bytes(1000) == 300 + 11000
    # capacity 20300 with no margin: line 1 -> (20000 - 1000) / 10 = 1900; line 2 -> 15000.
    assert est.max_batch(20300, margin=0.0) == 1900
    assert est.max_batch(5000, margin=0.0) == 0


def _small_workload() -> Workload:
    model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(1)])
    return Workload(
        "d", model, loss="mse", optimizer="sgd", label_shape=(1,), label_dtype="float32"
    )


def test_a_step_training_two_models_holds_both_their_peaks() -> None:
    """`combined`: the weights, gradients and slots of both, and at each batch the sum
    of their predicted peaks (a step that trains a generator and a discriminator)."""
    gen = M.estimate_memory(_dense_workload)

    disc = M.estimate_memory(_small_workload)
    models = [_dense_workload().model, _small_workload().model]
    both = M.combined([gen, disc], models, "step")
    assert both.parameters == gen.parameters + disc.parameters == 5560 + 11
    assert both.optimizer == "Adam + SGD" and both.workload == "step"
    for batch in (1, 64, 4096, 10**6):
        assert both.peak_bytes(batch) == gen.peak_bytes(batch) + disc.peak_bytes(batch)
    assert [t.batch for t in both.traces] == [2, 4]
    assert both.traces[1].peak_bytes == gen.traces[1].peak_bytes + disc.traces[1].peak_bytes


def test_a_model_holding_another_has_its_weights_counted_once() -> None:
    """`combined` counts each variable once: a combined model around a discriminator
    adds only its own layers' weights to the discriminator's."""
    disc = keras.Sequential([keras.Input((10,)), keras.layers.Dense(1)])
    outer = keras.Sequential([keras.Input((3,)), keras.layers.Dense(10), disc])
    est = M.estimate_memory(_dense_workload)
    both = M.combined([est, est], [disc, outer], "step")
    assert both.parameters == outer.count_params() == (3 * 10 + 10) + (10 + 1)
    assert both.weights_bytes == 4 * outer.count_params()


class Gan(keras.Model):
    """A train_step of its own and no call, as keras-io's GANs write it: a critic's step
    and a generator's, each with its own Adam."""

    def __init__(self) -> None:
        super().__init__()
        self.gen = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8)])
        self.disc = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
        self.g_opt, self.d_opt = keras.optimizers.Adam(), keras.optimizers.Adam()

    def train_step(self, real):  # type: ignore[no-untyped-def]
        real = real[0] if isinstance(real, tuple) else real
        noise = tf.random.normal((tf.shape(real)[0], 4))
        with tf.GradientTape() as tape:
            fake = self.disc(self.gen(noise))
            d_loss = tf.reduce_mean(fake) - tf.reduce_mean(self.disc(real))
        d_weights = self.disc.trainable_weights
        self.d_opt.apply_gradients(zip(tape.gradient(d_loss, d_weights), d_weights, strict=True))
        with tf.GradientTape() as tape:
            g_loss = -tf.reduce_mean(self.disc(self.gen(noise)))
        g_weights = self.gen.trainable_weights
        self.g_opt.apply_gradients(zip(tape.gradient(g_loss, g_weights), g_weights, strict=True))
        return {"d_loss": d_loss, "g_loss": g_loss}


def _gan_workload(model: Any) -> Workload:
    data = tf.data.Dataset.from_tensor_slices(tf.zeros((64, 8)))
    return Workload("gan", model, loss=None, optimizer="adam", dataset=data, batch_size=16)


def test_a_model_with_a_train_step_of_its_own_is_planned_from_that_step() -> None:
    """Keras-io's GANs have no `call`: the step traced is the model's own train_step
    (both passes, both gradients, both updates), its slots those of the two optimizers
    it built; and the extrapolation matches a direct trace of it."""
    model = Gan()
    est = M.estimate_memory(lambda: _gan_workload(model))
    assert est.method == M.OWN_STEP
    assert est.parameters == (4 * 8 + 8) + (8 + 1)
    assert est.optimizer == "Adam x2"
    assert 2 * 49 * 4 <= est.optimizer_bytes <= 2 * 49 * 4 + 64  # m and v of each weight
    direct = M.trace_own_step(model, _gan_workload(model).dataset, 16)
    assert est.step_bytes(16) == direct.peak_bytes
    assert est.step_bytes_per_sample > 0


class Untraceable(keras.Model):
    """A train_step that reads a tensor's value in Python (runs eagerly only), and a
    call: the forward pass and its compiled loss are traced instead."""

    def __init__(self) -> None:
        super().__init__()
        self.dense = keras.layers.Dense(1)

    def call(self, x):  # type: ignore[no-untyped-def]
        return self.dense(x)

    def train_step(self, data):  # type: ignore[no-untyped-def]
        float(tf.reduce_sum(data[0]).numpy())
        return super().train_step(data)


def test_an_own_train_step_that_does_not_trace_falls_back_to_the_forward_pass() -> None:
    model = Untraceable()
    data = tf.data.Dataset.from_tensor_slices((tf.zeros((64, 8)), tf.zeros((64, 1))))
    wl = Workload("u", model, loss="mse", optimizer="adam", dataset=data, batch_size=16)
    est = M.estimate_memory(lambda: wl)
    assert est.method == "liveness of the traced training step"
    assert est.parameters == 8 + 1 and est.optimizer == "Adam"


def test_several_optimizers_are_named_with_their_counts() -> None:
    assert M.optimizer_names(["Adam", "Adam"]) == "Adam x2"
    assert M.optimizer_names(["Adam", "SGD", "Adam"]) == "Adam x2 + SGD"


def _sequences(lengths: list[int]) -> Any:
    """Token sequences of the given lengths and a label each, as a dataset whose spec
    leaves the length unknown (a generator's, a ragged tensor's examples)."""

    def examples():  # type: ignore[no-untyped-def]
        for n in lengths:
            yield tf.ones((n,), tf.int32), tf.constant(1.0)

    signature = (tf.TensorSpec((None,), tf.int32), tf.TensorSpec((), tf.float32))
    return tf.data.Dataset.from_generator(examples, output_signature=signature)


def test_a_dimension_the_data_leaves_unknown_is_planned_at_its_largest_read() -> None:
    """Sequences of varying length: the plan traces the longest of the first examples
    read (padded, an upper bound), and says so; a spec that says every dimension reads
    nothing."""
    from tfaccel.workloads.synthetic import EXAMPLES_READ, example_spec

    data = _sequences([5, 40, 12] + [3] * EXAMPLES_READ + [90])
    spec, note = example_spec(data)
    assert spec[0].shape == (40,) and spec[1].shape == ()
    assert note == f"(40,), () per example: the largest of its first {EXAMPLES_READ} examples read"
    known = tf.data.Dataset.from_tensor_slices(tf.zeros((4, 3)))
    assert example_spec(known) == (known.element_spec, None)
    inputs = keras.Input((None,), dtype="int32")
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(50, 8)(inputs))
    model = keras.Model(inputs, keras.layers.Dense(1)(pooled))
    wl = Workload("seq", model, loss="mse", optimizer="adam", dataset=data, batch_size=16)
    est = M.estimate_memory(lambda: wl)
    assert est.shapes == note
    assert est.step_bytes_per_sample >= 40 * 8 * 4  # the embedded sequence, at 40


def test_a_model_built_under_a_strategy_is_planned_in_its_replica() -> None:
    """A model built and compiled in a MirroredStrategy's scope (one replica here): its
    variables are read in a replica only, so the step is traced in one, and its
    optimizer's slots are built in the scope, as fit does both."""
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = keras.Sequential(
            [keras.Input((100,)), keras.layers.Dense(50), keras.layers.Dense(10)]
        )
        model.compile("adam", "mse")
    wl = Workload(
        "m", model, loss="mse", optimizer=model.optimizer, label_shape=(10,), label_dtype="float32"
    )
    est = M.estimate_memory(lambda: wl)
    assert est.parameters == 5560 and est.optimizer == "Adam"
    assert 2 * 5560 * 4 <= est.optimizer_bytes <= 2 * 5560 * 4 + 64
    assert est.step_bytes(16) == M.estimate_memory(_dense_workload).step_bytes(16)


def test_models_trained_one_after_another_hold_the_largest_step() -> None:
    """`combined` with each model's rows (a loop's train_on_batch calls: a step each):
    the weights counted once and every optimizer's slots, and at each batch of the
    first model the larger of the two steps, the second's at its own rows (twice the
    first's here: a discriminator's real and generated rows)."""
    first = M.estimate_memory(_dense_workload)

    second = M.estimate_memory(_small_workload)
    models = [_dense_workload().model, _small_workload().model]
    both = M.combined([first, second], models, "loop", rows=[16, 32])
    fixed = first.weights_bytes + second.weights_bytes + first.optimizer_bytes
    fixed += second.optimizer_bytes
    for batch in (1, 64, 4096):
        larger = max(first.step_bytes(batch), second.step_bytes(2 * batch))
        assert both.peak_bytes(batch) == fixed + larger
    assert both.gradients_bytes == max(first.gradients_bytes, second.gradients_bytes)
    assert both.method.endswith("the largest (a step each)")


def test_an_own_step_is_not_traced_at_a_dimension_left_unknown() -> None:
    """`trace_own_step` batches the examples' specs as the forward-pass trace does
    (`at_batch`): a dimension still unknown is refused, not traced and counted as
    nothing."""
    from tfaccel.errors import InputError

    with pytest.raises(InputError, match="unknown shape"):
        M.trace_own_step(Gan(), _sequences([3, 5]), 16)
