"""The model entry point contract and its errors."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("keras")

from tfaccel.errors import InputError, WorkloadError
from tfaccel.plan.child import estimate_in_child
from tfaccel.workloads import load_workload

MODULE = """
import keras

def good():
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])

def with_dataset():
    import numpy as np
    return good(), (np.zeros((5, 8), "float32"), np.zeros((5, 2), "float32"))

def as_dict():
    return {"model": good(), "loss": "mse", "sample_unit": "rows"}

def compiled():
    m = good()
    m.compile(optimizer="sgd", loss="mse")
    return m

def ten_classes():
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(10, activation="softmax")])

def per_token():
    inp = keras.Input((12,), dtype="int32")
    x = keras.layers.Embedding(50, 8)(inp)
    return keras.Model(inp, keras.layers.Dense(50)(x))

def regression():
    m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)])
    m.compile(optimizer="sgd", loss="mse")
    return m

def own_labels():
    return {"model": good(), "loss": "mse", "label_shape": [2], "label_dtype": "float32"}

def bad_labels():
    return {"model": good(), "label_shape": "two"}

def two_outputs():
    inp = keras.Input((8,))
    return keras.Model(inp, [keras.layers.Dense(2)(inp), keras.layers.Dense(3)(inp)])

def heads():
    inp = keras.Input((8,))
    out = {"cls": keras.layers.Dense(3)(inp), "box": keras.layers.Dense(4)(inp)}
    cls = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return {"model": keras.Model(inp, out), "loss": {"cls": cls, "box": "mse"}}

def heads_without_a_loss():
    return {"model": heads()["model"], "loss": {"cls": "sparse_categorical_crossentropy"}}

class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(32, activation="relu")
        self.out = keras.layers.Dense(10)

    def call(self, x):
        return self.out(self.hidden(x))

def subclassed():
    return Net()

def subclassed_with_data():
    import numpy as np, tensorflow as tf
    x = np.random.rand(64, 16).astype("float32")
    y = np.random.randint(0, 10, 64).astype("int32")
    return Net(), tf.data.Dataset.from_tensor_slices((x, y)).batch(8)

def text():
    inp = keras.Input((), dtype="string")
    vec = keras.layers.TextVectorization(max_tokens=100, output_sequence_length=8)
    vec.adapt(["w1 w2 w3", "w4 w5 w6"])
    x = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(100, 8)(vec(inp)))
    return keras.Model(inp, keras.layers.Dense(2)(x))

def wrong_type():
    return 42

def crashes():
    raise RuntimeError("no GPU for you")

not_callable = 3
"""


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "my_models.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield "my_models"
    sys.modules.pop("my_models", None)


def test_the_accepted_return_shapes(user_module: str) -> None:
    assert load_workload(f"{user_module}:good").model.count_params() == 18
    wl = load_workload(f"{user_module}:with_dataset")  # read as single examples
    assert [tuple(t.shape) for t in wl.dataset.element_spec] == [(8,), (2,)]
    wl = load_workload(f"{user_module}:as_dict")
    assert wl.loss == "mse" and wl.sample_unit == "rows"
    wl = load_workload(f"{user_module}:compiled")
    assert type(wl.optimizer).__name__ == "SGD"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_colon", "must name a module and a function"),
        ("missing_module_xyz:f", "Cannot import module 'missing_module_xyz'"),
        ("my_models:nope", "has no callable 'nope'"),
        ("my_models:not_callable", "has no callable 'not_callable'"),
        ("my_models:wrong_type", "did not return a Keras model"),
        ("my_models:crashes", "raised while building the model"),
        ("my_models:bad_labels", "label settings tfaccel cannot use"),
        ("my_models:heads_without_a_loss", "gives no loss for output 'box'"),
        ("my_models:subclassed", "declares no inputs (a subclassed model)"),
    ],
)
def test_bad_entry_points(user_module: str, target: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        load_workload(target)
    assert message in caught.value.message
    if target.endswith("crashes"):
        assert "RuntimeError: no GPU for you" in caught.value.message
    if target == "no_colon":  # nothing close to a built-in: a script's command is named
        assert "python SCRIPT.py" in (caught.value.hint or "")


def test_synthetic_labels_follow_the_output_and_the_loss(user_module: str) -> None:
    from tfaccel.workloads.synthetic import synthetic_labels

    wl = load_workload(f"{user_module}:ten_classes")  # default sparse cross-entropy
    assert (wl.label_shape, wl.label_dtype, wl.label_classes) == ((), "int32", 10)
    y = synthetic_labels(wl, 64)
    assert y.shape == (64,) and y.max() < 10
    assert np.isfinite(_one_step(wl, 8))
    wl = load_workload(f"{user_module}:per_token")
    assert (wl.label_shape, wl.label_classes) == ((12,), 50)
    assert np.isfinite(_one_step(wl, 4))
    wl = load_workload(f"{user_module}:regression")
    assert (wl.label_shape, wl.label_dtype) == ((3,), "float32")
    assert np.isfinite(_one_step(wl, 4))
    wl = load_workload(f"{user_module}:text")  # vectorizes its own text
    from tfaccel.workloads.synthetic import synthetic_inputs

    words = synthetic_inputs(wl.model, 3)
    assert words.shape == (3,) and len(str(words[0]).split()) == 16
    assert np.isfinite(_one_step(wl, 3))
    wl = load_workload(f"{user_module}:own_labels")
    assert (wl.label_shape, wl.label_dtype) == ((2,), "float32")


def test_a_model_with_several_outputs_gets_labels_for_each(user_module: str) -> None:
    from tfaccel.plan.memory import estimate_memory
    from tfaccel.workloads import LabelSpec
    from tfaccel.workloads.synthetic import synthetic_labels

    wl = load_workload(f"{user_module}:two_outputs")  # one sparse loss for both
    assert wl.label_specs == [LabelSpec((), "int32", 2), LabelSpec((), "int32", 3)]
    y = synthetic_labels(wl, 16)
    assert isinstance(y, tuple) and y[0].max() < 2 and y[1].max() < 3
    assert np.isfinite(_one_step(wl, 16))
    wl = load_workload(f"{user_module}:heads")  # a dict of outputs, a loss each
    assert wl.label_specs == {"cls": LabelSpec((), "int32", 3), "box": LabelSpec((4,), "float32")}
    y = synthetic_labels(wl, 4)
    assert y["box"].shape == (4, 4) and y["box"].dtype == np.float32
    assert np.isfinite(_one_step(wl, 4))
    est = estimate_memory(lambda: load_workload(f"{user_module}:heads"))
    assert est.parameters == 8 * 3 + 3 + 8 * 4 + 4 and est.step_bytes_per_sample > 0


def test_a_subclassed_model_takes_its_shapes_from_its_dataset(user_module: str) -> None:
    from tfaccel.plan.memory import estimate_memory
    from tfaccel.workloads.synthetic import dataset_specs, input_bytes_per_sample

    wl = load_workload(f"{user_module}:subclassed_with_data")
    x, y = dataset_specs(wl.dataset, 4)  # the dataset yields batches of 8: re-batched
    assert x.shape.as_list() == [4, 16] and y.shape.as_list() == [4]
    assert input_bytes_per_sample(wl.model, dataset=wl.dataset) == 16 * 4
    assert input_bytes_per_sample(wl.model, 2, wl.dataset) == 16 * 2  # sent in 16-bit
    est = estimate_memory(lambda: load_workload(f"{user_module}:subclassed_with_data"))
    assert est.parameters == 16 * 32 + 32 + 32 * 10 + 10
    assert est.step_bytes_per_sample > 0


def test_the_fingerprint_is_the_entry_point_file(user_module: str, tmp_path: Path) -> None:
    from tfaccel.workloads import source_fingerprint

    assert source_fingerprint("resnet50") is None
    assert source_fingerprint("missing_module_xyz:f") is None
    before = source_fingerprint(f"{user_module}:good")
    assert before is not None and before.endswith("my_models.py")
    assert source_fingerprint(f"{user_module}:ten_classes") == before  # one file
    (tmp_path / "my_models.py").write_text(MODULE + "\n# edited\n")
    assert source_fingerprint(f"{user_module}:good") != before
    pkg = tmp_path / "pkg_xyz"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('not imported')")
    (pkg / "models.py").write_text("x = 1")
    assert str(source_fingerprint("pkg_xyz.models:f")).endswith("models.py")


def test_child_estimate_and_its_errors(user_module: str) -> None:
    est = estimate_in_child(f"{user_module}:good", "float32")
    assert est.parameters == 18 and est.optimizer == "Adam"
    with pytest.raises(InputError, match="did not return a Keras model"):
        estimate_in_child(f"{user_module}:wrong_type", "float32")
    with pytest.raises((InputError, WorkloadError)):
        estimate_in_child("builtin_that_does_not_exist", "float32")


def test_kerashub_bert_with_dict_inputs_traces_and_trains() -> None:
    pytest.importorskip("keras_hub")
    from tfaccel.plan.memory import estimate_memory
    from tfaccel.workloads.builtin import bert_hub
    from tfaccel.workloads.synthetic import synthetic_inputs

    wl = bert_hub(layers=1, hidden=32, heads=2, ffn=64)
    x = synthetic_inputs(wl.model, 4)
    assert set(x) == {"token_ids", "segment_ids", "padding_mask"}
    assert (x["padding_mask"] == 1).all() and (x["segment_ids"] == 0).all()
    est = estimate_memory(lambda: bert_hub(layers=1, hidden=32, heads=2, ffn=64))
    assert est.parameters == wl.model.count_params()
    assert est.step_bytes_per_sample > 0


def test_transformers_train_with_kerashubs_own_optimizer_defaults() -> None:
    """Adam at 1e-3 made BERT's loss swing far above chance: the transformers use the
    rates KerasHub's tasks compile with, and each model gets an optimizer of its own."""
    pytest.importorskip("keras_hub")
    from tfaccel.optimize.report import ConfigureReport
    from tfaccel.optimize.settings import Settings
    from tfaccel.workloads.builtin import bert_hub, gpt2

    small = {"layers": 1, "hidden": 32, "heads": 2, "ffn": 64}
    bert = bert_hub(**small)
    lm = gpt2(seq_len=16, vocab=1000, **small)
    report = ConfigureReport(Settings(), "float32", 0, ())
    a, b = report.optimizer(bert.optimizer), report.optimizer(bert.optimizer)
    assert a is not b and type(a).__name__ == "Adam"
    assert float(a.learning_rate) == pytest.approx(5e-5)
    assert float(report.optimizer(lm.optimizer).learning_rate) == pytest.approx(2e-5)
    # The shared config is not consumed by deserializing it.
    assert bert.optimizer == {"class_name": "Adam", "config": {"learning_rate": 5e-5}}


def _one_step(wl, batch: int) -> float:
    from tfaccel.workloads.synthetic import synthetic_inputs, synthetic_labels

    x = synthetic_inputs(wl.model, batch)
    y = synthetic_labels(wl, batch)
    wl.model.compile(optimizer="adam", loss=wl.loss)
    loss = wl.model.train_on_batch(x, y)
    return float(loss[0] if isinstance(loss, list) else loss)  # several outputs: the total


def test_gpt2_workload_trains_on_next_token_labels() -> None:
    pytest.importorskip("keras_hub")
    from tfaccel.workloads.builtin import gpt2

    wl = gpt2(seq_len=16, vocab=1000, layers=1, hidden=32, heads=2, ffn=64)
    assert wl.label_shape == (16,)
    assert tuple(wl.model.output.shape) == (None, 16, 1000)
    loss = _one_step(wl, 2)
    assert loss == pytest.approx(np.log(1000), rel=0.2)  # random weights: about ln(vocab)


def test_yolo_workload_has_float_targets_of_the_head_shape() -> None:
    from tfaccel.workloads.builtin import yolo

    wl = yolo(size=64)
    # 3 heads at strides 8, 16, 32: 8x8 + 4x4 + 2x2 anchors, 4*16 box + 80 class outputs
    assert wl.label_shape == (84, 144)
    assert wl.label_dtype == "float32"
    from tfaccel.workloads.synthetic import synthetic_labels

    y = synthetic_labels(wl, 2)
    assert y.dtype == np.float32 and y.min() >= 0 and y.max() < 1
    assert np.isfinite(_one_step(wl, 2))


def test_conv3d_workload_trains() -> None:
    from tfaccel.workloads.builtin import conv3d

    wl = conv3d(frames=4, size=32, classes=10)
    assert tuple(wl.model.output.shape) == (None, 10)
    assert np.isfinite(_one_step(wl, 2))


def test_builtin_names_include_every_bench_workload() -> None:
    from tfaccel.workloads import BUILTIN

    assert {"resnet50", "bert", "gpt2", "yolo", "conv3d", "tiny"} <= set(BUILTIN)
