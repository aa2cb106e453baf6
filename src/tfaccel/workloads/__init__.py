"""Built-in workloads and the user's `module:function` entry point.

The entry-point contract: `module:function` names a callable taking no arguments that
returns one of
- a `keras.Model` (its inputs must have static shapes except the batch dimension; a
  subclassed model, which declares none, comes with a dataset),
- a tuple `(model, data)` or `(model, x, y)`, where data is any form
  `tfaccel.workloads.inputs` reads: a `tf.data.Dataset` of (inputs, labels) examples
  or batches, `(x, y)` arrays, a `keras.utils.PyDataset`, a generator;
- a dict with `model` and optionally `dataset` (data as above), `batched` (whether
  that data holds batches, where the model cannot tell), `loss`, `optimizer`,
  `sample_unit`, and for synthetic labels `label_shape`, `label_dtype`,
  `label_classes`; any other key is refused.
The model may be compiled or not; a compiled model's loss and optimizer are used.
Without a dataset, synthetic labels follow the model's outputs and loss: class ids below
an output's last dimension for a sparse cross-entropy (the default loss), else floats
in [0, 1) of the output's shape; a model with several outputs gets a list or dict of
labels, as its outputs are.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfaccel.errors import InputError


@dataclass(frozen=True)
class LabelSpec:
    """The synthetic labels of one output, per sample: int class ids below `classes`,
    or floats in [0, 1)."""

    shape: tuple[int, ...]
    dtype: str = "int32"
    classes: int = 1000


@dataclass
class Workload:
    """A model with what it takes to train it."""

    name: str
    model: Any  # keras.Model
    loss: Any = "sparse_categorical_crossentropy"
    optimizer: Any = "adam"
    dataset: Any = None  # examples (workloads.inputs)
    batch_size: int | None = None  # the size of the batches the user's data came in
    examples: int | None = None  # how many examples the data holds, where it says
    sample_unit: str = "samples"
    label_shape: tuple[int, ...] = ()
    label_dtype: str = "int32"
    label_classes: int = 1000
    # A model with several outputs: a list or dict (as its outputs) of LabelSpec; the
    # three fields above describe a single output.
    label_specs: Any = None
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Builtin:
    """A built-in model, one row: its entry point; its batch in `tfaccel bench` (without
    --batch); its revision, raised when it starts to train differently (another
    optimizer, other labels): tune journals key their trials with it, so that trials
    whose losses meant something else are not resumed; and whether `bench all` runs it.
    Its sample unit is its Workload's (`builtin.py`)."""

    entry: str
    bench_batch: int = 64
    revision: int | None = None
    in_bench_all: bool = False


# Revision 2 of the transformers: KerasHub's own optimizer defaults instead of Adam at
# 1e-3, at which their losses swung between 0.7 and 2.9 and the accuracy guard compared
# noise. A new built-in model is one row here and its function in `builtin.py`.
BUILTINS: dict[str, Builtin] = {
    "resnet50": Builtin("tfaccel.workloads.builtin:resnet50", 256, in_bench_all=True),
    "bert": Builtin("tfaccel.workloads.builtin:bert_base", 128, revision=2),
    "bert_hub": Builtin("tfaccel.workloads.builtin:bert_hub", 128, revision=2, in_bench_all=True),
    "gpt2": Builtin("tfaccel.workloads.builtin:gpt2", revision=2),
    "yolo": Builtin("tfaccel.workloads.builtin:yolo"),
    "conv3d": Builtin("tfaccel.workloads.builtin:conv3d"),
    "tiny": Builtin("tfaccel.workloads.builtin:tiny_cnn", 128),
}
BUILTIN: dict[str, str] = {name: row.entry for name, row in BUILTINS.items()}
REVISION: dict[str, int] = {name: row.revision for name, row in BUILTINS.items() if row.revision}


def _import_callable(spec: str) -> Callable[[], Any]:
    import difflib

    if ":" not in spec:
        close = difflib.get_close_matches(spec, BUILTIN, 1, cutoff=0.6)
        raise InputError(
            "A model entry point must name a module and a function",
            expected="'module:function' (e.g. 'train:build') or a built-in workload: "
            + ", ".join(BUILTIN),
            received=repr(spec),
            hint=f"did you mean {close[0]}?"
            if close
            else "tune, plan and profile take a training script as a command: "
            "python SCRIPT.py [ARGS...]",
        )
    module_name, _, attr = spec.partition(":")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise InputError(
            f"Cannot import module {module_name!r} of entry point {spec!r}",
            expected="an importable module on PYTHONPATH or in the current directory",
            received=f"{type(exc).__name__}: {exc}",
        ) from exc
    found = getattr(module, attr, None)
    if found is None or not callable(found):
        names = [
            public
            for public, value in vars(module).items()
            if callable(value) and not public.startswith("_")
        ]
        close = difflib.get_close_matches(attr, names, 1, cutoff=0.6)
        raise InputError(
            f"Module {module_name!r} has no callable {attr!r}",
            expected="a function that returns a Keras model",
            received=f"{attr!r} is {type(found).__name__}" if found is not None else "nothing",
            hint=f"did you mean {module_name}:{close[0]}?" if close else None,
        )
    return found


def _module_file(module_name: str) -> Path | None:
    """The source file of `module_name`, found without importing it or its packages."""
    from importlib.machinery import PathFinder

    search: list[str] | None = [str(Path.cwd()), *sys.path]
    found = None
    parts = module_name.split(".")
    for i in range(len(parts)):
        found = PathFinder.find_spec(".".join(parts[: i + 1]), search)
        if found is None:
            return None
        search = list(found.submodule_search_locations or [])
    origin = getattr(found, "origin", None)
    return Path(origin) if origin and Path(origin).is_file() else None


def source_fingerprint(spec: str) -> str | None:
    """A digest of the file that defines a user's entry point (None for built-ins, or
    when the file cannot be found). Journals keep it with each trial, so a tune after the
    user edited that file measures again instead of replaying the old figures. Edits in
    other modules it imports are not seen."""
    import hashlib

    if spec in BUILTIN or ":" not in spec:
        return None
    path = _module_file(spec.partition(":")[0])
    if path is None:
        return None
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()[:16] + f" {path.name}"


def load_workload(spec: str, peek: bool = False) -> Workload:
    """Build a built-in workload by name, or the user's `module:function`. `peek`: read
    the first batch of a dataset whose batch size is not static (`Workload.batch_size`)."""
    import keras

    target = BUILTIN.get(spec, spec)
    entry = _import_callable(target)
    try:
        result = entry()
    except Exception as exc:
        raise InputError(
            f"The entry point {spec!r} raised while building the model",
            expected="a function that returns a Keras model",
            received=f"{type(exc).__name__}: {exc}",
        ) from exc
    if isinstance(result, Workload):
        return result
    extras: dict[str, Any] = {}
    dataset = None
    if isinstance(result, dict):
        _check_keys(spec, result)
        extras = dict(result)
        model = extras.pop("model", None)
        dataset = extras.pop("dataset", None)
    elif isinstance(result, tuple) and len(result) == 2:
        model, dataset = result
    elif isinstance(result, tuple) and len(result) == 3:  # (model, x, y)
        model, dataset = result[0], result[1:]
    else:
        model = result
    if not isinstance(model, keras.Model):
        raise InputError(
            f"The entry point {spec!r} did not return a Keras model",
            expected="a keras.Model, a (model, dataset) tuple, or a dict with 'model'",
            received=type(result).__name__
            if not isinstance(result, (dict, tuple))
            else f"{type(result).__name__} holding {type(model).__name__}",
        )
    batch_size = examples = None
    if dataset is not None:
        from tfaccel.workloads.inputs import count_examples, user_data

        found = user_data(dataset, model, extras.pop("batched", None), peek)
        examples = count_examples(dataset, found)
        dataset, batch_size = found
    workload = Workload(spec, model, dataset=dataset, batch_size=batch_size, examples=examples)
    if getattr(model, "compiled", False) and getattr(model, "optimizer", None) is not None:
        workload.optimizer = model.optimizer
        workload.loss = getattr(model, "loss", None) or workload.loss
    for key in ("loss", "optimizer", "sample_unit"):
        if key in extras:
            setattr(workload, key, extras.pop(key))
    if dataset is None and not _declared_inputs(model):
        raise InputError(
            f"The entry point {spec!r} returned a {type(model).__name__} that declares no "
            "inputs (a subclassed model), and no dataset to take their shapes from",
            expected="a model built on keras.Input(...) (Sequential or functional), or a "
            "(model, dataset) tuple",
            received=f"{type(model).__name__} without inputs",
        )
    label_keys = {
        label_key: extras.pop(label_key) for label_key in LABEL_KEYS if label_key in extras
    }
    if label_keys:
        _set_labels(workload, spec, label_keys)
    elif dataset is None:
        _labels_from_output(workload, spec)
    workload.extras = extras
    return workload


LABEL_KEYS = ("label_shape", "label_dtype", "label_classes")
# What the dict an entry point returns may hold.
ENTRY_KEYS = ("model", "dataset", "loss", "optimizer", "sample_unit", "batched", *LABEL_KEYS)


def _check_keys(spec: str, result: dict[str, Any]) -> None:
    """A misspelled key ("optimiser") would be ignored silently: refuse it."""
    unknown = [key for key in result if key not in ENTRY_KEYS]
    if unknown:
        import difflib

        close = [
            match for key in unknown for match in difflib.get_close_matches(str(key), ENTRY_KEYS, 1)
        ]
        raise InputError(
            f"The entry point {spec!r} returned a dict with unknown keys",
            expected="keys among " + ", ".join(ENTRY_KEYS),
            received=", ".join(map(repr, unknown)),
            hint=f"did you mean {', '.join(close)}?" if close else None,
        )


def _declared_inputs(model: Any) -> bool:
    """Does the model declare its inputs (Sequential or functional, on keras.Input)?"""
    try:
        return bool(model.inputs)
    except (AttributeError, ValueError):  # subclassed: no graph of inputs
        return False


def _is_sparse(loss: Any) -> bool:
    """Does `loss` take integer class ids (sparse categorical cross-entropy)?"""
    name = loss if isinstance(loss, str) else getattr(loss, "__name__", type(loss).__name__)
    return "sparse" in str(name).lower()


def _output_label(output: Any, loss: Any, spec: str) -> LabelSpec:
    """The labels one output and its loss take: class ids below the last dimension for
    a sparse cross-entropy, else floats in [0, 1) of the output's shape."""
    dims = list(output.shape[1:])
    if any(dim is None for dim in dims):
        raise InputError(
            f"An output of {spec!r} has an unknown dimension, so synthetic labels cannot be shaped",
            expected="static output shapes except the batch dimension, or a dataset",
            received=f"output shape {tuple(output.shape)}",
        )
    if _is_sparse(loss) and dims:
        return LabelSpec(tuple(int(dim) for dim in dims[:-1]), "int32", int(dims[-1]))
    return LabelSpec(tuple(int(dim) for dim in dims), "float32")


def _labels_from_output(workload: Workload, spec: str) -> None:
    """Synthetic labels that fit the model's outputs and its loss (one loss for every
    output, or a list / dict of them, as Keras' compile takes)."""
    try:
        out = workload.model.output  # a functional model's outputs, as built (dict or list)
    except (AttributeError, ValueError):  # a Sequential model has its list only
        out = list(workload.model.outputs)
    loss = workload.loss

    def loss_of(key: Any) -> Any:
        if isinstance(loss, dict):
            if key not in loss:
                raise InputError(
                    f"The entry point {spec!r} gives no loss for output {key!r}",
                    expected="a loss for every output: " + ", ".join(map(repr, out)),
                    received=", ".join(map(repr, loss)),
                )
            return loss[key]
        if isinstance(loss, (list, tuple)):
            return loss[key]
        return loss

    if isinstance(out, dict):
        workload.label_specs = {
            output_name: _output_label(output, loss_of(output_name), spec)
            for output_name, output in out.items()
        }
    elif isinstance(out, (list, tuple)) and len(out) > 1:
        if isinstance(loss, (list, tuple)) and len(loss) != len(out):
            raise InputError(
                f"The entry point {spec!r} gives {len(loss)} losses for {len(out)} outputs",
                expected="one loss, or one per output",
                received=f"{len(loss)} losses",
            )
        workload.label_specs = [
            _output_label(output, loss_of(i), spec) for i, output in enumerate(out)
        ]
    else:
        one = _output_label(out[0] if isinstance(out, (list, tuple)) else out, loss, spec)
        workload.label_shape, workload.label_dtype, workload.label_classes = (
            one.shape,
            one.dtype,
            one.classes,
        )


def _set_labels(workload: Workload, spec: str, given: dict[str, Any]) -> None:
    """The entry point's own `label_shape` / `label_dtype` / `label_classes`, checked."""
    shape = given.get("label_shape", workload.label_shape)
    dtype = given.get("label_dtype", workload.label_dtype)
    classes = given.get("label_classes", workload.label_classes)
    ok_shape = isinstance(shape, (tuple, list)) and all(
        isinstance(dim, int) and dim > 0 for dim in shape
    )
    ok_dtype = dtype in ("int32", "int64", "float32", "float16")
    ok_classes = isinstance(classes, int) and classes > 0
    if not (ok_shape and ok_dtype and ok_classes):
        raise InputError(
            f"The entry point {spec!r} returned label settings tfaccel cannot use",
            expected="label_shape: a tuple of positive ints (per sample), label_dtype: "
            "int32, int64, float32 or float16, label_classes: a positive int",
            received=", ".join(f"{key}={value!r}" for key, value in given.items()),
        )
    workload.label_shape = tuple(shape)
    workload.label_dtype = dtype
    workload.label_classes = classes
