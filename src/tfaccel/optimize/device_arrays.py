"""fit's numpy arrays kept in GPU memory for the whole fit (`device_arrays=True`).

Given numpy arrays, Keras slices each batch on the host (a tf.data pipeline of index
batches and gathers) and copies it to the GPU at every step. Where the arrays fit in a
quarter of the GPU's memory, they are copied there once instead; the dataset fit sees
yields only each batch's indices, and the model's `train_step` gathers the batch on
the GPU before it runs the step as it always does (a custom `train_step` included).

The training is the same as Keras' own with arrays: the same batch size and steps per
epoch, every example once per epoch in a new random order (`shuffle=True`) or in order
(`shuffle=False`), the last partial batch kept, floats in Keras' float type, and
`validation_split` taken from the end of the arrays before any shuffling, as Keras
takes it. Arguments this cannot keep the same (`class_weight`, `shuffle="batch"`,
`steps_per_epoch`) leave the arrays as they are, said.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

# At most this share of the GPU's memory goes to the arrays: the model, its gradients,
# the optimizer's state and the activations need the rest.
MEMORY_SHARE = 0.25


def blocker(fit_args: dict[str, Any], memory_bytes: int | None) -> str | None:
    """Why fit's arguments `a` (as `inspect.signature(fit).bind` names them) keep their
    arrays as they are, or None: they can go to the GPU."""
    leaves = _leaves(fit_args)
    if not leaves or not all(_is_numeric_array(leaf) for leaf in leaves):
        return "fit is not given numeric numpy arrays"
    for name, why in (
        ("class_weight", "class_weight (Keras weighs each batch on the host)"),
        ("steps_per_epoch", "steps_per_epoch with arrays"),
    ):
        if fit_args.get(name) is not None:
            return f"the script passes {why}"
    if fit_args.get("shuffle") == "batch":
        return 'the script passes shuffle="batch"'
    if len({int(leaf.shape[0]) for leaf in leaves}) != 1:
        return "the arrays differ in their number of examples"
    size = sum(int(leaf.nbytes) for leaf in leaves)
    if memory_bytes is None:
        return "the GPU's memory is not known"
    if size > MEMORY_SHARE * memory_bytes:
        return (
            f"the arrays take {size / 2**30:.1f} GiB, over a quarter of the GPU's "
            f"{memory_bytes / 2**30:.0f} GiB"
        )
    return None


def _leaves(fit_args: dict[str, Any]) -> list[Any]:
    import keras

    packed = (fit_args.get("x"), fit_args.get("y"), fit_args.get("sample_weight"))
    return [leaf for leaf in keras.tree.flatten(packed) if leaf is not None]


def _is_numeric_array(leaf: Any) -> bool:
    import numpy as np

    return isinstance(leaf, np.ndarray) and leaf.ndim >= 1 and leaf.dtype.kind in "biuf"


@contextlib.contextmanager
def kept_on_device(
    model: Any, fit_args: dict[str, Any], batch: int, device: str, repeat: bool = False
) -> Iterator[str]:
    """fit's arguments `a` rewritten in place to train from a copy of the arrays on
    `device` at `batch` examples a step (`repeat`: endlessly, in full batches, as tune
    times a step); `model.train_step` gathers each batch there until the block ends.
    Yields the note to say. The caller checked `blocker`."""
    import keras

    from tfaccel._tf import import_tensorflow

    tf = import_tensorflow()

    data = keras.utils.pack_x_y_sample_weight(
        fit_args.get("x"), fit_args.get("y"), fit_args.get("sample_weight")
    )
    split = float(fit_args.get("validation_split") or 0.0)
    if split > 0 and fit_args.get("validation_data") is None:
        data, fit_args["validation_data"] = _split(data, split)
    data = keras.tree.map_structure(_floatx, data)
    with tf.device(device):
        tensors = keras.tree.map_structure(
            lambda array: tf.identity(tf.convert_to_tensor(array)), data
        )
    count = int(keras.tree.flatten(data)[0].shape[0])
    fit_args.update(
        x=index_batches(count, batch, bool(fit_args.get("shuffle", True)), repeat),
        y=None,
        sample_weight=None,
        batch_size=None,
        validation_split=0.0,
        shuffle=False,  # index_batches shuffled them; Keras warns of shuffle with a dataset
    )
    own = model.train_step

    def gathered_step(indices: Any) -> Any:
        return own(keras.tree.map_structure(lambda array: tf.gather(array, indices), tensors))

    model.train_function = None  # a fit before this one compiled the step without it
    model.train_step = gathered_step
    try:
        size = sum(int(array.nbytes) for array in keras.tree.flatten(data))
        yield f"the arrays ({size / 2**20:,.0f} MiB) kept in GPU memory, each batch gathered there"
    finally:
        del model.train_step
        model.train_function = None


def index_batches(count: int, batch: int, shuffle: bool, repeat: bool = False) -> Any:
    """One epoch of batches of indices into `n` examples, as Keras batches arrays: a
    new permutation each epoch (`shuffle`), full batches, then the partial one; with
    `repeat`, endless."""
    from tfaccel._tf import import_tensorflow

    tf = import_tensorflow()

    def order(_: Any) -> Any:
        indices = tf.range(count, dtype=tf.int64)
        return tf.random.shuffle(indices) if shuffle else indices

    if repeat:  # as tune times a step: full batches, one epoch's order after another
        order_ds = tf.data.Dataset.range(1).repeat().map(order).unbatch()
        return order_ds.batch(batch, drop_remainder=True).prefetch(2)
    order_ds = tf.data.Dataset.range(1).map(order).unbatch().batch(batch)
    return order_ds.apply(
        tf.data.experimental.assert_cardinality(math.ceil(count / batch))
    ).prefetch(2)


def _split(data: Any, fraction: float) -> tuple[Any, Any]:
    """The arrays' first part and their last `fraction`, where Keras splits them."""
    import keras

    count = int(keras.tree.flatten(data)[0].shape[0])
    cut = math.floor(count * (1.0 - fraction))
    if cut in (0, count):
        raise ValueError(f"validation_split={fraction} leaves no examples on one side of {count}")
    first = keras.tree.map_structure(lambda array: array[:cut], data)
    return first, keras.tree.map_structure(lambda array: array[cut:], data)


def _floatx(array: Any) -> Any:
    """A float array in Keras' float type, as Keras' array adapter casts it."""
    import keras

    if array is not None and array.dtype.kind == "f" and str(array.dtype) != keras.config.floatx():
        return array.astype(keras.config.floatx())
    return array
