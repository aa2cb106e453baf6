"""Training memory of a Keras model, from a traced training step.

The step (forward, loss, gradients) is traced into a TensorFlow graph at two static
batch sizes. Walking the graph's operations in order, each tensor's buffer lives from
the op that makes it to its last consumer; ops that only alias their input (Identity,
Reshape, ReadVariableOp, ...) share the input's buffer. The largest sum of live buffers
is the step's peak. Two batch sizes give its fixed part and its cost per sample.
Weights and the optimizer's slots are added from the variables themselves (the
optimizer is built on the model to count them, not looked up in a table).

What this leaves out, and the GPU validation measures: cuDNN/cuBLAS workspaces,
allocator fragmentation, and what Grappler or XLA fuse away.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from tfaccel._tf import import_tensorflow
from tfaccel.errors import InputError

PlanPrecision = Literal["float32", "mixed_float16", "mixed_bfloat16"]
PRECISIONS: tuple[str, ...] = get_args(PlanPrecision)
ALIAS_OPS = frozenset(
    {
        "Identity",
        "IdentityN",
        "ReadVariableOp",
        "Reshape",
        "ExpandDims",
        "Squeeze",
        "StopGradient",
        "Snapshot",
        "PreventGradient",
        "EnsureShape",
        "CheckNumerics",
        "VarHandleOp",
        "Placeholder",
        "NoOp",
        "Const",
    }
)
# Placeholders, constants and variable reads are counted as inputs/weights, not step memory.
UNCOUNTED_OPS = frozenset({"VarHandleOp", "ReadVariableOp", "Const", "NoOp"})


@dataclass(frozen=True)
class StepTrace:
    """The liveness peak of one traced training step."""

    batch: int
    peak_bytes: int
    saved_for_backward_bytes: int  # forward outputs the gradient ops read
    ops: int
    unknown_shape_tensors: int
    curve: tuple[int, ...] = field(default=(), repr=False, compare=False)


@dataclass(frozen=True)
class MemoryEstimate:
    """Training memory of one model at one precision, as a function of batch size."""

    workload: str
    precision: str
    optimizer: str
    parameters: int
    trainable_parameters: int
    weights_bytes: int
    optimizer_bytes: int
    gradients_bytes: int  # inside the step's peak; shown on its own for reading
    step_lines: tuple[tuple[int, int], ...]  # (fixed, per-sample) bytes; peak is their max
    activations_bytes_per_sample: int  # saved for backward, per sample
    traces: tuple[StepTrace, ...]
    method: str = "liveness of the traced training step"

    @property
    def step_bytes_per_sample(self) -> int:
        """What each extra sample costs at large batch sizes."""
        return max((v for _, v in self.step_lines), default=0)

    def step_bytes(self, batch: int) -> int:
        return max((f + v * batch for f, v in self.step_lines), default=0)

    def peak_bytes(self, batch: int) -> int:
        """Predicted peak memory of a training step at `batch`."""
        return self.weights_bytes + self.optimizer_bytes + self.step_bytes(batch)

    def max_batch(self, capacity_bytes: float, margin: float = 0.10) -> int:
        """Largest batch whose predicted peak fits `capacity_bytes` less `margin`."""
        usable = capacity_bytes * (1.0 - margin) - self.weights_bytes - self.optimizer_bytes
        best: float = float("inf")
        for f, v in self.step_lines:
            if v <= 0:
                if f > usable:
                    return 0
                continue
            best = min(best, (usable - f) / v)
        return 0 if best == float("inf") or best < 1 else int(best)


def _tensor_bytes(t: Any) -> int | None:
    shape = t.shape
    if shape.rank is None or not shape.is_fully_defined():
        return None
    try:
        size = t.dtype.size
    except Exception:
        return None
    return int(math.prod(shape.as_list())) * int(size)


def live_curve(graph: Any, outputs: Sequence[Any]) -> tuple[list[int], int, int]:
    """Live bytes after each op's outputs are allocated, bytes saved for backward, and
    the number of floating-point tensors whose size is unknown (counted as 0)."""
    ops = graph.get_operations()
    index = {op.name: i for i, op in enumerate(ops)}
    end = len(ops)
    output_names = {t.name for t in outputs}
    buffer_of: dict[str, str] = {}
    size_of: dict[str, int] = {}
    last_use: dict[str, int] = {}
    born: dict[str, int] = {}
    unknown = 0
    saved = 0
    first_backward = next(
        (i for i, op in enumerate(ops) if op.name.startswith("gradient_tape/")), end
    )
    for i, op in enumerate(ops):
        for t in op.outputs:
            if op.type in ALIAS_OPS and op.inputs and op.type not in UNCOUNTED_OPS:
                buf = buffer_of.get(op.inputs[0].name, op.inputs[0].name)
            else:
                buf = t.name
                nbytes = (
                    0
                    if op.type in UNCOUNTED_OPS or t.dtype.name == "resource"
                    else _tensor_bytes(t)
                )
                if nbytes is None:
                    unknown += int(t.dtype.is_floating)
                    nbytes = 0
                size_of[buf] = nbytes
                born[buf] = i
            buffer_of[t.name] = buf
            uses = [index[c.name] for c in t.consumers() if c.name in index]
            last = max(uses) if uses else i
            if t.name in output_names:
                last = end
            last_use[buf] = max(last_use.get(buf, i), last)
            if (
                buf == t.name
                and i < first_backward
                and any(c.name.startswith("gradient_tape/") for c in t.consumers())
            ):
                saved += size_of.get(buf, 0)
    frees: dict[int, int] = {}
    for buf, last in last_use.items():
        frees[last] = frees.get(last, 0) + size_of.get(buf, 0)
    allocs: dict[int, int] = {}
    for buf, i in born.items():
        allocs[i] = allocs.get(i, 0) + size_of.get(buf, 0)
    live = 0
    curve: list[int] = []
    for i in range(end + 1):
        live += allocs.get(i, 0)
        curve.append(live)
        live -= frees.get(i, 0)
    return curve, saved, unknown


def pareto_lines(points: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """The (fixed, per-sample) lines not dominated by another; their max is the peak."""
    best: list[tuple[int, int]] = []
    for f, v in sorted(set(points), key=lambda p: (-p[1], -p[0])):
        if not best or f > max(b[0] for b in best):
            best.append((f, v))
    return tuple(best)


def trace_step(
    model: Any,
    loss_fn: Any,
    batch: int,
    label_shape: tuple[int, ...] = (),
    label_dtype: str = "int32",
    dataset: Any = None,
    y_spec: Any = None,
) -> StepTrace:
    """Trace forward + loss + gradients at a static batch and measure its liveness peak.
    With a `dataset`, its element shapes give the inputs and labels (a subclassed model
    declares none); else the model's inputs and `y_spec` (several outputs) or the label
    shape."""
    tf = import_tensorflow()

    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            pred = model(x, training=True)
            if y is None:  # inputs alone: the model's own train_step holds the loss; the
                # mean of its outputs takes the same backward pass through the model
                outs = tf.nest.flatten(pred)
                loss = tf.add_n([tf.reduce_mean(tf.cast(o, tf.float32)) for o in outs])
            else:
                loss = tf.reduce_mean(loss_fn(y, pred))
        return tape.gradient(loss, model.trainable_variables)

    fn = tf.function(step)
    from tfaccel.workloads.synthetic import dataset_specs, input_specs

    if dataset is not None:
        x_specs, y_spec = dataset_specs(dataset, batch)
    else:
        x_specs = input_specs(model, batch)
        if y_spec is None:
            y_spec = tf.TensorSpec([batch, *label_shape], dtype=label_dtype)
    concrete = fn.get_concrete_function(x_specs, y_spec)
    curve, saved, unknown = live_curve(concrete.graph, concrete.graph.outputs)
    return StepTrace(
        batch, max(curve), saved, len(concrete.graph.get_operations()), unknown, tuple(curve)
    )


def _optimizer_bytes(optimizer: Any, variables: Sequence[Any]) -> tuple[int, str]:
    from tfaccel.optimize.report import keras_optimizer

    opt = keras_optimizer(optimizer)
    name = type(opt).__name__
    built = getattr(opt, "built", False)
    if not built:
        opt.build(variables)
    total = 0
    for v in opt.variables:
        total += int(math.prod(v.shape)) * _dtype_size(v.dtype)
    return total, name


def _dtype_size(dtype: Any) -> int:
    import keras
    import numpy as np

    name = keras.backend.standardize_dtype(dtype)
    if name == "bfloat16":
        return 2
    return int(np.dtype(name).itemsize)


def estimate_memory(
    build: Callable[[], Any],
    precision: str = "float32",
    optimizer: Any = None,
    batches: tuple[int, int] = (2, 4),
) -> MemoryEstimate:
    """Estimate training memory for the workload `build()` returns, at `precision`.

    Args:
        build: returns a `tfaccel.workloads.Workload` (built under the precision policy).
        precision: float32, mixed_float16 or mixed_bfloat16.
        optimizer: overrides the workload's optimizer (a Keras name or instance).
        batches: the two static batch sizes traced.
    """
    if precision not in PRECISIONS:
        raise InputError(
            "Unknown precision",
            expected="one of " + ", ".join(PRECISIONS),
            received=f"precision={precision!r}",
        )
    import keras

    from tfaccel.workloads.loss import per_example_loss
    from tfaccel.workloads.synthetic import label_specs

    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(precision)
    try:
        wl = build()
        model = wl.model
        loss_fn = per_example_loss(wl.loss)
        traces = tuple(
            trace_step(model, loss_fn, b, dataset=wl.dataset, y_spec=label_specs(wl, b))
            for b in batches
        )
        weights = sum(int(math.prod(v.shape)) * _dtype_size(v.dtype) for v in model.weights)
        trainable = [v for v in model.trainable_weights]
        grads = sum(int(math.prod(v.shape)) * 4 for v in trainable)
        opt_bytes, opt_name = _optimizer_bytes(optimizer or wl.optimizer, trainable)
        t1, t2 = traces
        b1, b2 = t1.batch, t2.batch
        if len(t1.curve) == len(t2.curve):
            points = []
            for c1, c2 in zip(t1.curve, t2.curve, strict=True):
                v = max(0, (c2 - c1) // (b2 - b1))
                points.append((max(0, c1 - v * b1), v))
            lines = pareto_lines(points)
        else:  # the two traces differ in structure: fall back to the two peaks
            v = max(0, (t2.peak_bytes - t1.peak_bytes) // (b2 - b1))
            lines = ((max(0, t1.peak_bytes - v * b1), v),)
        saved = max(
            0, (t2.saved_for_backward_bytes - t1.saved_for_backward_bytes) // max(1, b2 - b1)
        )
        return MemoryEstimate(
            workload=wl.name,
            precision=precision,
            optimizer=opt_name,
            parameters=int(model.count_params()),
            trainable_parameters=int(sum(int(math.prod(v.shape)) for v in trainable)),
            weights_bytes=weights,
            optimizer_bytes=opt_bytes,
            gradients_bytes=grads,
            step_lines=lines,
            activations_bytes_per_sample=saved,
            traces=traces,
        )
    finally:
        keras.mixed_precision.set_global_policy(previous)
