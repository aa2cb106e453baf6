"""Synthetic inputs of a model's real shapes, for any input structure (tensor, list, dict).

String inputs (a model that vectorizes text itself) get 16 random words each. Integer
inputs get plausible values by name: masks are ones, segment ids zeros, token
ids random below 1000, or below the model's vocabulary where that is smaller (the largest
`keras.layers.Embedding`: segment and position tables are the smaller ones).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfaccel._tf import import_tensorflow


def _struct(model: Any) -> Any:
    """The model's inputs as a KerasTensor, a list of them, or a dict name -> tensor."""
    inp = getattr(model, "input", None)
    if isinstance(inp, dict):
        return inp
    inputs = list(model.inputs)
    return inputs[0] if len(inputs) == 1 else inputs


def _id_bound(model: Any, default: int = 1000) -> int:
    """Token ids stay below the vocabulary: the largest `keras.layers.Embedding`."""
    try:
        import keras

        layers = model._flatten_layers(include_self=False, recursive=True)
        dims = [int(x.input_dim) for x in layers if isinstance(x, keras.layers.Embedding)]
    except Exception:  # a model without Keras' layer tracking: keep the default
        return default
    return min(default, max(dims)) if dims else default


def static_shape(tensor: Any) -> tuple[int, ...]:
    """A model input's shape after the batch dimension, every size known; an InputError
    that names the input otherwise (synthetic data needs each size)."""
    from tfaccel.errors import InputError

    shape = list(tensor.shape)[1:]
    if any(dim is None for dim in shape):
        raise InputError(
            f"Model input {getattr(tensor, 'name', '?')!r} has an unknown dimension",
            expected="static shapes except the batch dimension (e.g. keras.Input((200, 8))), "
            "or data of the entry point's own, whose shapes are used",
            received=f"shape {tuple(tensor.shape)}",
        )
    return tuple(int(dim) for dim in shape)


def _leaf_array(tensor: Any, batch: int, rng: Any, high: int = 1000) -> Any:
    import numpy as np

    shape = (batch, *static_shape(tensor))
    dtype = str(tensor.dtype)
    name = str(getattr(tensor, "name", "")).lower()
    if "string" in dtype:  # text models that vectorize inside: 16 random words each
        words = rng.integers(0, 1000, (int(np.prod(shape)), 16))
        return np.array([" ".join(f"w{word}" for word in row) for row in words]).reshape(shape)
    if "int" in dtype or "bool" in dtype:
        if "mask" in name:
            return rng.integers(1, 2, shape).astype("bool" if "bool" in dtype else dtype)
        if "segment" in name:
            return rng.integers(0, 1, shape).astype(dtype)
        return rng.integers(0, high, shape).astype(dtype)
    # drawn in float32: a float64 draw cast down took 9.5 s for ResNet-50's batch of 1024
    # on a 2-core CPU, 1.5 s this way, in every trial
    return rng.standard_normal(shape, dtype=np.float32)


def synthetic_inputs(model: Any, batch: int, seed: int = 0) -> Any:
    import numpy as np

    rng = np.random.default_rng(seed)
    high = _id_bound(model)
    struct = _struct(model)
    if isinstance(struct, dict):
        return {name: _leaf_array(tensor, batch, rng, high) for name, tensor in struct.items()}
    if isinstance(struct, list):
        return tuple(_leaf_array(tensor, batch, rng, high) for tensor in struct)
    return _leaf_array(struct, batch, rng, high)


def input_specs(model: Any, batch: int) -> Any:
    """tf.TensorSpec structure matching `synthetic_inputs` (for tracing)."""
    tf = import_tensorflow()

    def spec(tensor: Any) -> Any:
        return tf.TensorSpec([batch, *static_shape(tensor)], dtype=tensor.dtype)

    struct = _struct(model)
    if isinstance(struct, dict):
        return {name: spec(tensor) for name, tensor in struct.items()}
    if isinstance(struct, list):
        return tuple(spec(tensor) for tensor in struct)
    return spec(struct)


def input_bytes_per_sample(model: Any, float_bytes: int | None = None, dataset: Any = None) -> int:
    """Bytes of one sample's inputs as the model declares them, or as the `dataset`'s
    elements hold them (float inputs counted at `float_bytes` each when given: 2 when
    `input_cast` sends them in 16-bit)."""
    import numpy as np

    if dataset is not None:
        tf = import_tensorflow()

        leaves = tf.nest.flatten(dataset_specs(dataset, 1)[0])
    else:
        struct = _struct(model)
        leaves = (
            list(struct.values())
            if isinstance(struct, dict)
            else struct
            if isinstance(struct, list)
            else [struct]
        )
    total = 0
    for tensor in leaves:
        values = (
            int(np.prod([int(dim) for dim in tensor.shape[1:]])) if len(tensor.shape) > 1 else 1
        )
        name = getattr(tensor.dtype, "name", None) or str(tensor.dtype)  # tf.DType or a string
        dtype = np.dtype(name) if name != "bfloat16" else np.dtype("float16")
        size = float_bytes if float_bytes and dtype.kind == "f" else dtype.itemsize
        total += values * size
    return total


def _map_labels(workload: Any, make: Callable[[Any], Any]) -> Any:
    """`fn` applied to each output's LabelSpec: one value, or a tuple / dict of them for
    a model with several outputs (`wl.label_specs`)."""
    from tfaccel.workloads import LabelSpec

    specs = workload.label_specs
    if isinstance(specs, dict):
        return {name: make(spec) for name, spec in specs.items()}
    if specs is not None:
        return tuple(make(spec) for spec in specs)
    return make(
        LabelSpec(tuple(workload.label_shape), workload.label_dtype, workload.label_classes)
    )


def synthetic_labels(workload: Any, batch: int, seed: int = 1) -> Any:
    """Labels for `batch` samples, structured as the model's outputs."""
    import numpy as np

    rng = np.random.default_rng(seed)

    def make(spec: Any) -> Any:
        shape = (batch, *spec.shape)
        if "float" in spec.dtype:  # regression / multi-label targets in [0, 1)
            return rng.random(shape).astype(spec.dtype)
        return rng.integers(0, spec.classes, shape).astype(spec.dtype)

    return _map_labels(workload, make)


def label_specs(workload: Any, batch: int) -> Any:
    """tf.TensorSpec structure matching `synthetic_labels` (for tracing)."""
    tf = import_tensorflow()

    return _map_labels(workload, lambda spec: tf.TensorSpec([batch, *spec.shape], dtype=spec.dtype))


def rebatched(dataset: Any, batch: int) -> Any:
    """The user's examples (`Workload.dataset`, see workloads.inputs) repeated and
    batched at `batch`, as tfaccel measures them."""
    from tfaccel.workloads.inputs import in_batches

    return in_batches(dataset.repeat(), batch, drop_remainder=True)


EXAMPLES_READ = 256  # examples read where the data's spec leaves a dimension unknown


def example_spec(dataset: Any) -> tuple[Any, str | None]:
    """The spec of the dataset's examples with every dimension known: where the spec
    leaves one unknown (windows cut by index, sequences of varying length), the largest
    of the first EXAMPLES_READ examples read; and then what was read, in words (else
    None)."""
    tf = import_tensorflow()
    spec = dataset.element_spec
    leaves = tf.nest.flatten(spec, expand_composites=False)
    dense = (tf.TensorSpec, tf.RaggedTensorSpec)  # a ragged example: its largest, padded
    if all(not isinstance(s, dense) or s.shape.is_fully_defined() for s in leaves):
        return spec, None
    largest: list[list[int] | None] = [None] * len(leaves)
    for example in dataset.take(EXAMPLES_READ):
        for i, tensor in enumerate(tf.nest.flatten(example, expand_composites=False)):
            shape = getattr(tensor, "shape", None)
            dims = shape.as_list() if shape is not None and shape.is_fully_defined() else None
            seen = largest[i]
            largest[i] = dims if seen is None or dims is None else list(map(max, seen, dims))
    filled = [
        tf.TensorSpec(dims, s.dtype) if isinstance(s, dense) and dims is not None else s
        for s, dims in zip(leaves, largest, strict=True)
    ]
    shapes = ", ".join(str(tuple(s.shape)) for s in filled if isinstance(s, tf.TensorSpec))
    note = f"{shapes} per example: the largest of its first {EXAMPLES_READ} examples read"
    return tf.nest.pack_sequence_as(spec, filled), note


def dataset_specs(dataset: Any, batch: int, element: Any = None) -> tuple[Any, Any]:
    """(inputs, labels) TensorSpec structures of the dataset's elements at `batch`: the
    shapes of the user's own data, for a model that declares no inputs (subclassed).
    Labels are None where the elements are inputs alone. `element`: their spec with
    every dimension known (`example_spec`), where the dataset's own leaves some out."""
    element = dataset.element_spec if element is None else element
    if not isinstance(element, tuple):
        element = (element,)
    labels = at_batch(element[1], batch) if len(element) > 1 else None
    return at_batch(element[0], batch), labels


def at_batch(element: Any, batch: int) -> Any:
    """A structure of one example's specs as TensorSpecs of `batch` of them; an
    InputError where a dimension is unknown."""
    tf = import_tensorflow()

    from tfaccel.errors import InputError

    def batched(spec: Any) -> Any:
        dims = list(spec.shape)
        if any(dim is None for dim in dims):
            raise InputError(
                "The dataset has an element of unknown shape",
                expected="static shapes per example (pad or resize in the pipeline)",
                received=f"shape {spec.shape}",
            )
        return tf.TensorSpec([batch, *dims], spec.dtype)

    return tf.nest.map_structure(batched, element)
