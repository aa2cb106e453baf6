"""Every form of data an entry point may return, read as single examples and
re-batched at a trial's batch size (real TensorFlow on the CPU)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("keras")

from tfaccel.errors import InputError
from tfaccel.workloads import load_workload
from tfaccel.workloads.synthetic import rebatched

MODULE = """
import numpy as np
import keras
import tensorflow as tf

def model():
    return keras.Sequential([keras.Input((256,)), keras.layers.Dense(4)])

def xb(n=64):
    return np.random.rand(n, 256).astype("float32"), np.random.randint(0, 4, n)

def from_tensors():                       # one batch, repeated: a static batch dimension
    return model(), tf.data.Dataset.from_tensors(xb()).repeat()

def generator_batched():                  # examples from a generator, batched by the user
    def gen():
        for _ in range(200):
            yield np.random.rand(256).astype("float32"), 1
    sig = (tf.TensorSpec((256,), tf.float32), tf.TensorSpec((), tf.int32))
    return model(), tf.data.Dataset.from_generator(gen, output_signature=sig).batch(64)

READS = []

def cached_pipeline():                    # its size read from `.batch(64)`, no batch read
    def gen():
        for _ in range(200):
            READS.append(1)
            yield np.random.rand(256).astype("float32"), 1
    sig = (tf.TensorSpec((256,), tf.float32), tf.TensorSpec((), tf.int32))
    ds = tf.data.Dataset.from_generator(gen, output_signature=sig).cache().shuffle(50)
    return model(), ds.batch(64).map(lambda x, y: (x * 2, y)).prefetch(2)

def generator_of_batches():               # batches of 64 from the generator itself
    def gen():
        for _ in range(20):
            yield np.random.rand(64, 256).astype("float32"), np.ones(64, "int32")
    sig = (tf.TensorSpec((None, 256), tf.float32), tf.TensorSpec((None,), tf.int32))
    return model(), tf.data.Dataset.from_generator(gen, output_signature=sig)

def examples():
    return model(), tf.data.Dataset.from_tensor_slices(xb(100))

def arrays():                             # keras.datasets style
    return model(), xb(100)

def triple():
    x, y = xb(100)
    return model(), x, y

def two_inputs():
    a, b = keras.Input((8,), name="a"), keras.Input((3,), name="b")
    out = keras.layers.Dense(2)(keras.layers.Concatenate()([a, b]))
    x = {"a": np.ones((16, 8), "float32"), "b": np.ones((16, 3), "float32")}
    data = tf.data.Dataset.from_tensors((x, np.zeros(16))).repeat()
    return keras.Model({"a": a, "b": b}, out), data

class Batches(keras.utils.PyDataset):
    def __len__(self):
        return 5
    def __getitem__(self, i):
        return xb(16)

def py_dataset():
    return model(), Batches()

class Loading(keras.utils.PyDataset):     # batches from files, read by 4 threads in fit
    def __init__(self):
        super().__init__(workers=4)
        self.threads = set()
    def __len__(self):
        return 8
    def __getitem__(self, i):
        import threading, time
        self.threads.add(threading.get_ident())
        time.sleep(0.05)
        return np.full((16, 256), i, "float32"), np.full(16, i % 4)

LOADING = Loading()

def py_dataset_workers():
    return model(), LOADING

def generator_object():                   # a generator of batches, read once
    return model(), (xb(16) for _ in range(10))

def generator_function():                 # a function returning examples afresh
    def gen():
        x, y = xb(50)
        return zip(x, y)
    return {"model": model(), "dataset": gen}

class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.d = keras.layers.Dense(4)
    def call(self, x):
        return self.d(x)

def subclassed_ambiguous():
    x, y = xb(64)
    return Net(), tf.data.Dataset.from_tensors((x, y)).repeat()

def subclassed_said():
    x, y = xb(64)
    data = tf.data.Dataset.from_tensors((x, y)).repeat()
    return {"model": Net(), "dataset": data, "batched": True}

def wrong_shape():
    return model(), tf.data.Dataset.from_tensors((np.ones((64, 100), "float32"), np.zeros(64)))

def inputs_alone():                      # an autoencoder's arrays: fit(x)
    return model(), np.ones((100, 256), "float32")

def inputs_alone_batches():               # a dataset of x alone, in batches
    return model(), tf.data.Dataset.from_tensor_slices(np.ones((100, 256), "float32")).batch(16)

def inputs_alone_dict():
    a = keras.Input((8,), name="a")
    return keras.Model({"a": a}, keras.layers.Dense(2)(a)), {"a": np.ones((40, 8), "float32")}

def quadruples():
    x = np.ones((8, 256), "float32")
    return model(), tf.data.Dataset.from_tensor_slices((x, x, x, x))

def uneven():
    return model(), (np.ones((10, 256), "float32"), np.zeros(9))

def misspelled():
    return {"model": model(), "optimiser": "sgd"}

def empty():
    return model(), iter(())
"""


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "user_data.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield "user_data"
    sys.modules.pop("user_data", None)


def _batch_shapes(spec: str, batch: int = 32) -> tuple[object, object]:
    wl = load_workload(spec)
    x, y = next(iter(rebatched(wl.dataset, batch)))[:2]
    shape = {k: tuple(v.shape) for k, v in x.items()} if isinstance(x, dict) else tuple(x.shape)
    return shape, tuple(y.shape)


@pytest.mark.parametrize(
    "entry",
    [
        "from_tensors",
        "generator_batched",
        "examples",
        "arrays",
        "triple",
        "py_dataset",
        "generator_object",
        "generator_function",
        "subclassed_said",
    ],
)
def test_each_form_is_rebatched_to_the_trial_batch(user_module: str, entry: str) -> None:
    assert _batch_shapes(f"{user_module}:{entry}") == ((32, 256), (32,))


def test_a_py_datasets_workers_read_its_batches(user_module: str) -> None:
    """As fit reads them: else a trial would time one reader, not the training."""
    wl = load_workload(f"{user_module}:py_dataset_workers")
    assert wl.batch_size == 16
    batches = list(rebatched(wl.dataset, 32).take(4))
    firsts = [b[0][:, 0].numpy().tolist() for b in batches]
    assert firsts[0] == [0.0] * 16 + [1.0] * 16 and firsts[3] == [6.0] * 16 + [7.0] * 16
    assert batches[0][1].dtype == np.int64 and batches[0][0].shape == (32, 256)
    assert len(sys.modules[user_module].LOADING.threads) > 1


def test_a_list_of_input_arrays_is_several_inputs_as_keras_reads_it() -> None:
    """fit([x1, x2], y) (keras-io's siamese network): tf.data would stack the list
    into one tensor of first dimension 2 ("Dimensions 2 and 60000 are not
    compatible")."""
    import keras

    from tfaccel.workloads.inputs import user_data

    a, b = keras.Input((8,)), keras.Input((3,))
    model = keras.Model([a, b], keras.layers.Dense(1)(keras.layers.Concatenate()([a, b])))
    x = [np.ones((64, 8), "float32"), np.ones((64, 3), "float32")]
    found = user_data((x, np.zeros(64, "float32")), model)
    inputs, labels = next(iter(found.examples.batch(16)))
    assert [tuple(t.shape) for t in inputs] == [(16, 8), (16, 3)] and labels.shape == (16,)
    assert model(inputs).shape == (16, 1)


def test_dict_inputs_of_batches(user_module: str) -> None:
    x, y = _batch_shapes(f"{user_module}:two_inputs", 4)
    assert x == {"a": (4, 8), "b": (4, 3)} and y == (4,)


@pytest.mark.parametrize(
    ("entry", "shape", "size"),
    [
        ("inputs_alone", (32, 256), None),
        ("inputs_alone_batches", (32, 256), 16),
        ("inputs_alone_dict", {"a": (32, 8)}, None),
    ],
)
def test_inputs_alone_are_read_as_fit_reads_them(
    user_module: str, entry: str, shape: object, size: int | None
) -> None:
    """x without labels (an autoencoder, a model whose own train_step needs none):
    batches of inputs alone, as Keras packs them, not 1-tuples."""
    wl = load_workload(f"{user_module}:{entry}", peek=True)
    assert wl.batch_size == size
    x = next(iter(rebatched(wl.dataset, 32)))
    got = {k: tuple(v.shape) for k, v in x.items()} if isinstance(x, dict) else tuple(x.shape)
    assert got == shape


def test_a_dataset_of_batches_trains_at_another_batch_size(user_module: str) -> None:
    """What failed before: batches batched again (32, 64, 256) against (None, 256)."""
    wl = load_workload(f"{user_module}:from_tensors")
    wl.model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    history = wl.model.fit(rebatched(wl.dataset, 32), steps_per_epoch=2, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"][-1])


@pytest.mark.parametrize(
    ("entry", "message", "detail"),
    [
        ("subclassed_ambiguous", "examples or batches", '"batched": True or False'),
        ("wrong_shape", "do not match the model's", "(64, 100)"),
        ("quadruples", "tuples of 4", "(256,)"),
        ("uneven", "same number of examples", "(9,)"),
        ("misspelled", "unknown keys", "'optimiser'"),
        ("empty", "yielded nothing", "no element"),
    ],
)
def test_data_tfaccel_cannot_read_gets_a_clear_error(
    user_module: str, entry: str, message: str, detail: str
) -> None:
    with pytest.raises(InputError) as caught:
        load_workload(f"{user_module}:{entry}")
    assert message in caught.value.message and detail in str(caught.value)
    if entry == "misspelled":
        assert caught.value.hint == "did you mean optimizer?"


@pytest.mark.parametrize(
    ("entry", "size", "read_first"),
    [
        ("from_tensors", 64, None),  # a static batch dimension
        ("generator_batched", 64, False),  # `.batch(64)`: read from the op
        ("cached_pipeline", 64, False),  # `.cache().shuffle().batch(64).map().prefetch()`
        ("generator_of_batches", 64, True),  # unknown until the first batch is read
        ("py_dataset", 16, None),
        ("generator_object", 16, None),
        ("two_inputs", 16, None),
        ("subclassed_said", 64, None),
        ("examples", None, None),
        ("arrays", None, None),
        ("generator_function", None, None),  # it yields examples
    ],
)
def test_the_size_of_the_users_batches_is_kept(
    user_module: str, entry: str, size: int | None, read_first: bool | None
) -> None:
    """What `tune` starts from: the batch size the user's own training runs at."""
    assert load_workload(f"{user_module}:{entry}", peek=True).batch_size == size
    if read_first:  # without peek, a dataset of unknown batch size is not read for it
        assert load_workload(f"{user_module}:{entry}").batch_size is None
    if read_first is False:  # known from the pipeline: no batch was read for it
        assert load_workload(f"{user_module}:{entry}").batch_size == size
        assert sys.modules[user_module].READS == []


def test_whether_a_model_takes_float_inputs() -> None:
    """What `tune` reads before trying input_cast, which leaves integer inputs alone."""
    import keras

    from tfaccel.workloads.inputs import takes_floats

    tokens = keras.Input((16,), dtype="int32")
    text = keras.Model(tokens, keras.layers.Embedding(100, 4)(tokens))
    assert takes_floats(text) is False
    image = keras.Input((8, 8, 3))
    mixed = keras.Model([tokens, image], [text(tokens), image])
    assert takes_floats(mixed) is True
    assert takes_floats(keras.Sequential([keras.layers.Dense(2)])) is None  # no inputs yet


def test_sequences_padded_per_batch_are_padded_again() -> None:
    """Text padded per batch (`padded_batch`): its examples differ in length, so they
    are batched again with padding, in a trial and in `run`."""
    import tensorflow as tf

    from tfaccel.workloads.inputs import as_examples, rebatch

    lengths = [3, 9, 4, 12, 5, 7]
    seqs = tf.data.Dataset.from_generator(
        lambda: ([1] * n for n in lengths), output_signature=tf.TensorSpec([None], tf.int32)
    )
    ds = tf.data.Dataset.zip((seqs, tf.data.Dataset.range(6))).padded_batch(2)
    model = keras_model_of_tokens()
    again, own = rebatch(ds, model, 4)
    shapes = [tuple(x.shape) for x, _ in again]
    assert own == 2 and shapes == [(4, 12), (2, 7)]
    x, y = next(iter(rebatched(as_examples(ds, model), 3)))  # a trial's batches
    assert x.shape == (3, 12) and y.shape == (3,)


def keras_model_of_tokens() -> Any:
    import keras

    inputs = keras.Input((None,), dtype="int32")
    return keras.Model(inputs, keras.layers.Embedding(20, 4)(inputs))


def test_a_rebatched_dataset_keeps_its_length() -> None:
    """Keras shows an epoch's progress and ends it without a warning where a dataset
    says its length: a re-batched one says it where its `.batch(n)` tells the count."""
    import keras
    import tensorflow as tf

    from tfaccel.workloads.inputs import rebatch

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    x, y = np.random.rand(200, 4).astype("float32"), np.random.rand(200, 1).astype("float32")
    examples = tf.data.Dataset.from_tensor_slices((x, y))
    for ds, batches in [
        (examples.cache().shuffle(50).batch(32).prefetch(1), 4),  # 200 examples, 64 a batch
        (examples.batch(32, drop_remainder=True).map(lambda a, b: (a, b)), 3),  # 192
        (examples.padded_batch(32), 4),
    ]:
        out, own = rebatch(ds, model, 64)
        assert own == 32 and int(out.cardinality()) == batches == sum(1 for _ in out)
    out, _ = rebatch(examples.batch(32).take(3), model, 64)  # the count changed after .batch
    assert int(out.cardinality()) < 0 and sum(1 for _ in out) == 2


def test_a_generator_object_read_again_goes_on_where_it_stopped() -> None:
    """A script's `fit(gen())` on an endless generator: the trial reads some batches, then
    the noise scale's reading (or a race's) reads more. tf.data closes a pass's Python
    generator when its iterator goes; the user's generator must stay open for the next
    pass (it was closed with it, and the next pass got one batch: "fewer examples than 4
    batches" for an endless stream). A finite one, read whole, repeats its elements."""
    import keras

    from tfaccel.workloads.inputs import in_batches, user_data

    def endless() -> Any:
        step = 0
        while True:
            yield np.full((8, 3), step, "float32"), np.zeros(8, "float32")
            step += 1

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    examples = user_data(endless(), model).examples
    assert sum(1 for _ in examples.take(40)) == 40  # five batches of 8
    again = [float(x[0, 0]) for x, _ in in_batches(examples, 16, True).take(6)]
    assert len(again) == 6 and again == sorted(again) and again[0] >= 5.0  # goes on
    finite = (np.full((8, 3), i, "float32") for i in range(3))
    examples = user_data(finite, model).examples
    first = [float(x[0]) for x in examples]
    assert len(first) == 24 and [float(x[0]) for x in examples] == first


def test_batches_without_the_last_1_a_model_input_declares_are_batches() -> None:
    """Strings for a `TextVectorization` behind `Input((1,), dtype="string")`, batched
    by the script to shape (None,): Keras adds the last 1, so they are batches (read as
    examples of shape (None,), the trial fed the model (32, None) and failed)."""
    import keras
    import tensorflow as tf

    from tfaccel.workloads.inputs import as_examples, is_batched, user_data

    texts = tf.constant([f"good day {i}" for i in range(40)])
    vectorize = keras.layers.TextVectorization(max_tokens=20, output_sequence_length=4)
    vectorize.adapt(texts)
    inputs = keras.Input((1,), dtype="string")
    model = keras.Model(inputs, keras.layers.Embedding(20, 2)(vectorize(inputs)))
    ds = tf.data.Dataset.from_tensor_slices((texts, tf.range(40))).batch(8)
    assert user_data(ds, model).batch_size == 8
    x, _ = next(iter(rebatched(as_examples(ds, model), 5)))
    assert x.shape == (5,) and model(x).shape == (5, 4, 2)
    spec = (tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.int32))
    assert is_batched(spec, model)  # no `.batch` to read: the shapes say it
    one = (tf.TensorSpec([1], tf.string), tf.TensorSpec([], tf.int32))
    assert not is_batched(one, model)  # an example of the declared shape


def test_a_dataset_that_ends_in_its_batch_holds_batches() -> None:
    """Whatever the shapes: a model of input (None, 1) given batches of shape (None,)."""
    import keras
    import tensorflow as tf

    from tfaccel.workloads.inputs import user_data

    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    ds = tf.data.Dataset.from_tensor_slices((tf.ones(30), tf.zeros(30))).batch(10).prefetch(2)
    found = user_data(ds, model)
    assert found.batch_size == 10 and found.examples.element_spec[0].shape == ()
