"""The user's data, in whatever form an entry point returns it, as one dataset of
single examples that each trial batches at its own batch size.

Accepted: a `tf.data.Dataset` of examples or of batches (static or unknown batch
dimension), `(x, y)` arrays or tensors (numpy, as `keras.datasets` returns them; x may
be a tuple or dict), a `keras.utils.PyDataset`, a generator object, or a function that
returns a fresh iterator. As in `model.fit`, an element is `(inputs, labels)`,
`(inputs, labels, sample_weights)`, or inputs alone (a tensor, a dict, or a 1-tuple:
an autoencoder's, or a model whose own `train_step` or `add_loss` needs no labels).
Whether a dataset yields examples or batches is read from
the model's declared inputs: an element of the same rank as a model input (which
counts the batch dimension) is a batch, one of a rank less is an example, but for a
batch of unknown size without the last dimension of 1 a model input declares (Keras
adds it: strings for a `TextVectorization`, one feature a row), and a dataset that ends
in its `.batch(n)` holds batches whatever the shapes. A model that
declares no inputs (subclassed) leaves it open where every element dimension is
static; the entry point then says so with `"batched": True` or `False`.

The size of the user's batches, where the data comes in batches, is what their own
training runs at: `tune` starts there, so that Keras' defaults are measured as the user
would run them. It is read from the data's static first dimension or its first batch.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from tfaccel._tf import import_tensorflow
from tfaccel.errors import InputError

FORMS = (
    "a tf.data.Dataset of (inputs, labels) examples or batches, (x, y) arrays (or x "
    "alone), a keras.utils.PyDataset, a generator, or a function returning an iterator"
)
ELEMENTS = "(inputs, labels), (inputs, labels, sample_weights) or inputs alone, as model.fit takes"


class UserData(NamedTuple):
    examples: Any  # a tf.data.Dataset of single examples, of the user's structure
    batch_size: int | None  # the size of the user's batches; None: examples, or not read


def as_examples(data: Any, model: Any, batched: bool | None = None) -> Any:
    """`data` as a tf.data.Dataset of single examples (see the module's doc)."""
    return user_data(data, model, batched).examples


def user_data(data: Any, model: Any, batched: bool | None = None, peek: bool = False) -> UserData:
    """`data` as examples, and the size of its batches. A tf.data.Dataset of batches
    whose first dimension is unknown (`.batch(64)`) gives its size only with `peek`,
    which reads its first batch."""
    tf = import_tensorflow()
    if isinstance(data, tf.data.Dataset):
        return _dataset(data, model, batched, peek)
    if _is_py_dataset(data):
        return _from_py_dataset(data, model)
    if isinstance(data, (tuple, list)) and len(data) in (1, 2, 3):
        return UserData(_from_arrays(tuple(data)), None)
    if isinstance(data, dict) or hasattr(data, "shape"):  # x alone: arrays or tensors
        return UserData(_from_arrays(data), None)
    if isinstance(data, Iterator):
        return _from_iterator(_once(data), model, batched, read_once=True)
    if callable(data):
        return _from_iterator(lambda: iter(data()), model, batched)
    raise InputError(
        "The entry point's data is of a form tfaccel cannot read",
        expected=FORMS,
        received=type(data).__name__,
    )


def count_examples(data: Any, found: UserData) -> int | None:
    """How many examples the user's data holds, where it says so without being read:
    a dataset of known length (arrays, `from_tensor_slices`), one of batches whose
    `.batch(n)` tells it, else its batches times their size (at most one batch over),
    a PyDataset's length times its batch size; None otherwise (a generator)."""
    tf = import_tensorflow()
    count = int(found.examples.cardinality())
    if count >= 0:
        return count
    if isinstance(data, tf.data.Dataset):
        exact = _examples_in(data)
        batches = int(data.cardinality())
        if exact or batches < 0 or not found.batch_size:
            return exact
        return batches * found.batch_size
    if _is_py_dataset(data) and found.batch_size:
        try:
            return len(data) * found.batch_size
        except TypeError:
            return None
    return None


def rebatch(dataset: Any, model: Any, size: int) -> tuple[Any, int | None]:
    """A tf.data.Dataset at batch `size`, and the size of its own batches (None where it
    holds examples). Batches of that size already are kept as they are: unbatching
    loses a dataset's length (Keras then learns it only at the end of the first
    epoch), which is told again where the pipeline's `.batch(n)` says how many
    examples there are."""
    tf = import_tensorflow()
    found = user_data(dataset, model, peek=True)
    if found.batch_size == size:
        return dataset, size
    out = in_batches(found.examples, size)
    examples = _examples_in(dataset) if int(out.cardinality()) < 0 else None
    if examples:
        out = out.apply(tf.data.experimental.assert_cardinality(-(-examples // size)))
    return out, found.batch_size


def in_batches(examples: Any, size: int, drop_remainder: bool = False) -> Any:
    """Examples in batches of `size`; padded with zeros, as `padded_batch` pads, where an
    example's shape varies (token sequences that came padded per batch: each keeps its
    old padding, and a batch pads to its longest)."""
    tf = import_tensorflow()
    specs = tf.nest.flatten(examples.element_spec)
    if any(isinstance(spec, tf.TensorSpec) and _varies(spec.shape) for spec in specs):
        return examples.padded_batch(size, drop_remainder=drop_remainder)
    return examples.batch(size, drop_remainder=drop_remainder)


def _varies(shape: Any) -> bool:
    return shape.rank is not None and None in shape.as_list()


def _dataset(dataset: Any, model: Any, batched: bool | None, peek: bool) -> UserData:
    _check_element(dataset.element_spec)
    if batched is None:  # a `.batch(n)` at its end says so, whatever the shapes
        batched = _batch_op(dataset) is not None or is_batched(dataset.element_spec, model)
    if not batched:
        return UserData(dataset, None)
    size = _leading(dataset.element_spec) or _batch_op_size(dataset)
    if size is None and peek:
        size = _leading(next(iter(dataset.take(1)), None))
    return UserData(dataset.unbatch(), size)


# Transformations that keep a batch's size, between the dataset `fit` gets and its
# `.batch(n)`: the size is read there, without reading a batch (which would read the
# user's files, and after a `.cache()` makes TensorFlow warn that the cache was left
# partly filled).
_KEEP_BATCH = {
    "_RepeatDataset", "_PrefetchDataset", "_MapDataset", "_ParallelMapDataset",
    "_OptionsDataset", "_TakeDataset", "_SkipDataset", "_ShuffleDataset", "CacheDataset",
    "_CacheDataset", "_FilterDataset", "_IgnoreErrorsDataset", "_AssertCardinalityDataset",
    "_ShardDataset",
}  # fmt: skip


def _batch_op(dataset: Any) -> Any:
    """The last `.batch(n)` (or `padded_batch`) before `ds`, if only size-keeping
    transformations follow it."""
    for _ in range(64):
        if getattr(dataset, "_batch_size", None) is not None:
            return dataset
        if type(dataset).__name__ not in _KEEP_BATCH:
            return None
        dataset = getattr(dataset, "_input_dataset", None)
    return None


def _static(tensor: Any) -> Any:
    return import_tensorflow().get_static_value(tensor) if tensor is not None else None


def _batch_op_size(dataset: Any) -> int | None:
    return _size_of(_batch_op(dataset))


def _size_of(operation: Any) -> int | None:
    """The n of a `.batch(n)` dataset, where it is a positive constant."""
    size = _static(getattr(operation, "_batch_size", None))
    return int(size) if size is not None and int(size) > 0 else None


def _examples_in(dataset: Any) -> int | None:
    """How many examples a finite dataset of batches holds, where its `.batch(n)` and
    what comes before it say (a re-batched dataset's length: Keras would otherwise
    learn it in the first epoch). None where anything between changes the count."""
    operation = _batch_op(dataset)
    size, drop = _size_of(operation), _static(getattr(operation, "_drop_remainder", None))
    if size is None or drop is None:
        return None
    total, batches = int(operation._input_dataset.cardinality()), int(dataset.cardinality())
    whole = total // size if drop else -(-total // size)
    if total < 0 or batches != whole:
        return None
    return whole * size if drop else total


def _leading(element: Any) -> int | None:
    """The first dimension of an element's first input (a batch's size), if known."""
    tf = import_tensorflow()
    if element is None:
        return None
    first = (_shape(tf.nest.flatten(inputs_of(element))[0]) or (None,))[0]
    return int(first) if first is not None else None


def inputs_of(element: Any) -> Any:
    """The inputs of an element: its first item, or the element where it is inputs alone
    (how `keras.utils.unpack_x_y_sample_weight` reads it)."""
    return element[0] if isinstance(element, tuple) else element


def _check_element(element: Any) -> None:
    if isinstance(element, tuple) and len(element) not in (1, 2, 3):
        raise InputError(
            f"The data's elements are tuples of {len(element)}",
            expected=ELEMENTS,
            received=_shapes(element),
        )


def is_batched(element: Any, model: Any) -> bool:
    """Are these elements (an element_spec, or arrays) batches for `model`? See the
    module's doc; raises InputError naming the shapes where it cannot tell."""
    tf = import_tensorflow()
    x = inputs_of(element)
    shapes = [_shape(tensor) for tensor in tf.nest.flatten(x)]
    declared = _declared_shapes(model)
    if declared:
        verdicts = {
            _verdict(shape, model_shape)
            for shape, model_shape in zip(shapes, declared, strict=False)
        }
        if len(verdicts) == 1 and None not in verdicts:
            return verdicts.pop()  # type: ignore[return-value]
        raise InputError(
            "The data's inputs do not match the model's, as examples or as batches",
            expected="inputs of the model's shapes "
            + ", ".join(str(tuple(tensor.shape)) for tensor in model.inputs)
            + " (batches) or without their first dimension (examples)",
            received=_shapes(x),
        )
    leading = {(_shape(tensor) or (0,))[0] for tensor in tf.nest.flatten(element)}
    if None in leading:
        return True  # an unknown first dimension: a batch of any size
    if len(leading) > 1:
        return False  # inputs and labels of different first sizes: examples
    raise InputError(
        "Cannot tell whether the data holds examples or batches: the model declares no "
        "inputs (a subclassed model) and every element starts with the same size",
        expected='"batched": True or False in the dict the entry point returns',
        received=_shapes(element),
    )


def _verdict(shape: tuple[Any, ...], model_shape: tuple[Any, ...]) -> bool | None:
    """True: a batch of the model's input; False: one example of it; None: neither."""

    def fits(dims: tuple[Any, ...]) -> bool:
        want = model_shape[1:]
        return len(dims) == len(want) and all(
            dim is None or wanted is None or dim == wanted
            for dim, wanted in zip(dims, want, strict=True)
        )

    if shape and fits(shape[1:]):
        return True
    # Keras adds an input's last 1 to a batch (of unknown size) without it
    squeezed = len(model_shape) >= 2 and model_shape[-1] == 1 and bool(shape)
    if squeezed and shape[0] is None and fits((*shape[1:], 1)):
        return True
    return False if fits(shape) else None


def takes_floats(model: Any) -> bool | None:
    """Does the model declare a floating-point input (what `input_cast` sends in 16
    bits)? False for a model of token ids only; None where it declares no inputs."""
    try:
        inputs = model.inputs
    except (AttributeError, ValueError):  # subclassed: no declared inputs
        return None
    if not inputs:
        return None
    return any("float" in str(getattr(tensor, "dtype", "")) for tensor in inputs)


def _declared_shapes(model: Any) -> list[tuple[Any, ...]]:
    tf = import_tensorflow()
    try:
        inputs = model.inputs
    except (AttributeError, ValueError):  # subclassed: no declared inputs
        return []
    if not inputs:
        return []
    try:  # a functional model's dict of inputs, in the order tf.nest flattens data
        structured = model.input
    except (AttributeError, ValueError):  # Sequential: its list only
        structured = inputs
    return [tuple(tensor.shape) for tensor in tf.nest.flatten(structured)]


def _shape(tensor: Any) -> tuple[Any, ...]:
    shape = getattr(tensor, "shape", None)
    if shape is None:
        return ()
    return tuple(shape.as_list()) if hasattr(shape, "as_list") else tuple(shape)


def _shapes(element: Any) -> str:
    tf = import_tensorflow()
    try:
        return str(tf.nest.map_structure(lambda tensor: _shape(tensor), element))[:300]
    except Exception:
        return repr(element)[:300]


def _from_arrays(data: Any) -> Any:
    """Arrays of the whole data set, one row an example (keras.datasets style): a tuple
    (x, y[, w]) or (x,), or x alone. A list is several inputs, as Keras reads it
    (`fit([x1, x2], y)`, a siamese network's): tf.data would stack it into one tensor,
    whose first dimension is the list's length."""
    import keras

    tf = import_tensorflow()
    data = keras.tree.lists_to_tuples(data)
    sizes = {(_shape(array) or (None,))[0] for array in tf.nest.flatten(data)}
    if len(sizes) != 1 or None in sizes:
        raise InputError(
            "The arrays do not hold the same number of examples",
            expected="arrays whose first dimensions are equal (one row per example)",
            received=_shapes(data),
        )
    return tf.data.Dataset.from_tensor_slices(data)


def _is_py_dataset(data: Any) -> bool:
    import keras

    py_dataset = getattr(keras.utils, "PyDataset", None)
    return py_dataset is not None and isinstance(data, py_dataset)


def _from_py_dataset(data: Any, model: Any) -> UserData:
    """A PyDataset's batches, read by its `workers` threads at once as Keras' `fit`
    reads them (one reader would time the input, not the training, of a PyDataset whose
    `__getitem__` loads files); one after the other where it has one worker, no known
    length, or strings (which a numpy_function cannot return as they came)."""
    tf = import_tensorflow()
    found = _from_iterator(lambda: _batches_of(data), model, batched=True)
    workers = int(getattr(data, "workers", 1) or 1)
    batch_count = getattr(data, "num_batches", None)
    spec = found.examples.element_spec
    flat = tf.nest.flatten(spec)
    if (
        workers < 2
        or batch_count is None
        or any(leaf_spec.dtype == tf.string for leaf_spec in flat)
    ):
        return found

    def load(i: Any) -> list[Any]:
        batch = data[int(i)]
        batch = tuple(batch) if isinstance(batch, list) else batch
        leaves = tf.nest.flatten(batch)
        return [
            _np_array(x, leaf_spec.dtype.as_numpy_dtype)
            for x, leaf_spec in zip(leaves, flat, strict=True)
        ]

    def read(i: Any) -> Any:
        leaves = tf.numpy_function(
            load, [i], [leaf_spec.dtype for leaf_spec in flat], stateful=False
        )
        shaped = [
            tf.ensure_shape(tensor, [None, *leaf_spec.shape])
            for tensor, leaf_spec in zip(leaves, flat, strict=True)
        ]
        return tf.nest.pack_sequence_as(spec, shaped)

    batches = tf.data.Dataset.range(batch_count).map(
        read, num_parallel_calls=workers, deterministic=True
    )
    return UserData(batches.unbatch(), found.batch_size)


def _np_array(x: Any, dtype: Any) -> Any:
    import numpy as np

    return np.asarray(x, dtype=dtype)


def _batches_of(data: Any) -> Iterator[Any]:
    batch_count = getattr(data, "num_batches", None)
    indices = range(batch_count) if batch_count is not None else itertools.count()
    for i in indices:
        yield data[i]


def _once(iterator: Iterator[Any]) -> Callable[[], Iterator[Any]]:
    return lambda: iterator


def _from_iterator(
    make: Callable[[], Iterator[Any]],
    model: Any,
    batched: bool | None,
    read_once: bool = False,
) -> UserData:
    """A dataset over Python elements; the first one gives the signature. A generator
    object can be read only once: its elements are kept (`cache`) for the repeats."""
    tf = import_tensorflow()
    first_iter = make()
    try:
        first = next(first_iter)
    except StopIteration:
        raise InputError(
            "The entry point's data yielded nothing", expected=FORMS, received="no element"
        ) from None
    first = tuple(first) if isinstance(first, list) else first
    _check_element(first)
    if batched is None:
        batched = is_batched(first, model)

    def spec(value: Any) -> Any:
        tensor = tf.convert_to_tensor(value)
        shape = [None, *tensor.shape[1:]] if batched else list(tensor.shape)
        return tf.TensorSpec(shape, tensor.dtype)

    signature = tf.nest.map_structure(spec, first)
    if read_once:
        unread = [first]

        def source() -> Iterator[Any]:
            # Each pass goes on where the last one stopped (the first element once).
            # Not `yield from`: tf.data closes a pass's generator when its iterator
            # goes, and `yield from` would close the user's generator with it, leaving
            # a second pass (the noise scale's reading, a race's evaluation) one
            # element.
            while unread:
                yield unread.pop()
            for element in first_iter:  # noqa: UP028 (above: not yield from)
                yield element

    else:
        source = make
    dataset = tf.data.Dataset.from_generator(
        lambda: _as_tuples(source()), output_signature=signature
    )
    dataset = dataset.unbatch() if batched else dataset
    return UserData(dataset.cache() if read_once else dataset, _leading(first) if batched else None)


def _as_tuples(iterator: Iterator[Any]) -> Iterator[Any]:
    for element in iterator:
        yield tuple(element) if isinstance(element, list) else element
