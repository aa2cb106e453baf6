"""Built-in workloads and the user's `module:function` entry point.

The entry-point contract: `module:function` names a callable taking no arguments that
returns one of
- a `keras.Model` (its inputs must have static shapes except the batch dimension),
- a tuple `(model, dataset)` where dataset is a `tf.data.Dataset` of (inputs, labels),
- a dict with `model` and optionally `dataset`, `loss`, `optimizer`, `sample_unit`.
The model may be compiled or not; a compiled model's loss and optimizer are used.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfaccel.errors import InputError


@dataclass
class Workload:
    """A model with what it takes to train it."""

    name: str
    model: Any  # keras.Model
    loss: Any = "sparse_categorical_crossentropy"
    optimizer: Any = "adam"
    dataset: Any = None
    sample_unit: str = "samples"
    label_shape: tuple[int, ...] = ()
    label_dtype: str = "int32"
    label_classes: int = 1000
    extras: dict[str, Any] = field(default_factory=dict)


BUILTIN: dict[str, str] = {
    "resnet50": "tfaccel.workloads.builtin:resnet50",
    "bert": "tfaccel.workloads.builtin:bert_base",
    "bert_hub": "tfaccel.workloads.builtin:bert_hub",
    "gpt2": "tfaccel.workloads.builtin:gpt2",
    "yolo": "tfaccel.workloads.builtin:yolo",
    "conv3d": "tfaccel.workloads.builtin:conv3d",
    "tiny": "tfaccel.workloads.builtin:tiny_cnn",
}


def _import_callable(spec: str) -> Callable[[], Any]:
    if ":" not in spec:
        raise InputError(
            "A model entry point must name a module and a function",
            expected="'module:function' (e.g. 'train:build') or a built-in workload: "
            + ", ".join(BUILTIN),
            received=repr(spec),
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
    fn = getattr(module, attr, None)
    if fn is None or not callable(fn):
        raise InputError(
            f"Module {module_name!r} has no callable {attr!r}",
            expected="a function that returns a Keras model",
            received=f"{attr!r} is {type(fn).__name__}" if fn is not None else "nothing",
        )
    return fn


def load_workload(spec: str) -> Workload:
    """Build a built-in workload by name, or the user's `module:function`."""
    import keras

    target = BUILTIN.get(spec, spec)
    fn = _import_callable(target)
    try:
        result = fn()
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
        extras = dict(result)
        model = extras.pop("model", None)
        dataset = extras.pop("dataset", None)
    elif isinstance(result, tuple) and len(result) == 2:
        model, dataset = result
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
    wl = Workload(name=spec, model=model, dataset=dataset)
    if getattr(model, "compiled", False) and getattr(model, "optimizer", None) is not None:
        wl.optimizer = model.optimizer
        wl.loss = getattr(model, "loss", None) or wl.loss
    for key in ("loss", "optimizer", "sample_unit"):
        if key in extras:
            setattr(wl, key, extras.pop(key))
    wl.extras = extras
    return wl
