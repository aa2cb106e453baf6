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
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
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
    method: str = "liveness of the traced training step"  # forward, loss and gradients
    shapes: str | None = None  # where the data's spec left a dimension unknown: as read

    @property
    def step_bytes_per_sample(self) -> int:
        """What each extra sample costs at large batch sizes."""
        return max((per_sample for _, per_sample in self.step_lines), default=0)

    def step_bytes(self, batch: int) -> int:
        return max((fixed + per_sample * batch for fixed, per_sample in self.step_lines), default=0)

    def peak_bytes(self, batch: int) -> int:
        """Predicted peak memory of a training step at `batch`."""
        return self.weights_bytes + self.optimizer_bytes + self.step_bytes(batch)

    def max_batch(self, capacity_bytes: float, margin: float = 0.10) -> int:
        """Largest batch whose predicted peak fits `capacity_bytes` less `margin`."""
        usable = capacity_bytes * (1.0 - margin) - self.weights_bytes - self.optimizer_bytes
        best: float = float("inf")
        for fixed, per_sample in self.step_lines:
            if per_sample <= 0:
                if fixed > usable:
                    return 0
                continue
            best = min(best, (usable - fixed) / per_sample)
        return 0 if best == float("inf") or best < 1 else int(best)


def _tensor_bytes(tensor: Any) -> int | None:
    shape = tensor.shape
    if shape.rank is None or not shape.is_fully_defined():
        return None
    try:
        size = tensor.dtype.size
    except Exception:
        return None
    return int(math.prod(shape.as_list())) * int(size)


def live_curve(graph: Any, outputs: Sequence[Any]) -> tuple[list[int], int, int]:
    """Live bytes after each op's outputs are allocated, bytes saved for backward, and
    the number of floating-point tensors whose size is unknown (counted as 0)."""
    ops = graph.get_operations()
    index = {operation.name: i for i, operation in enumerate(ops)}
    end = len(ops)
    output_names = {tensor.name for tensor in outputs}
    buffer_of: dict[str, str] = {}
    size_of: dict[str, int] = {}
    last_use: dict[str, int] = {}
    born: dict[str, int] = {}
    unknown = 0
    saved = 0
    first_backward = next(
        (i for i, operation in enumerate(ops) if operation.name.startswith("gradient_tape/")), end
    )
    for i, operation in enumerate(ops):
        for tensor in operation.outputs:
            if (
                operation.type in ALIAS_OPS
                and operation.inputs
                and operation.type not in UNCOUNTED_OPS
            ):
                buf = buffer_of.get(operation.inputs[0].name, operation.inputs[0].name)
            else:
                buf = tensor.name
                nbytes = (
                    0
                    if operation.type in UNCOUNTED_OPS or tensor.dtype.name == "resource"
                    else _tensor_bytes(tensor)
                )
                if nbytes is None:
                    unknown += int(tensor.dtype.is_floating)
                    nbytes = 0
                size_of[buf] = nbytes
                born[buf] = i
            buffer_of[tensor.name] = buf
            uses = [
                index[consumer.name] for consumer in tensor.consumers() if consumer.name in index
            ]
            last = max(uses) if uses else i
            if tensor.name in output_names:
                last = end
            last_use[buf] = max(last_use.get(buf, i), last)
            if (
                buf == tensor.name
                and i < first_backward
                and any(
                    consumer.name.startswith("gradient_tape/") for consumer in tensor.consumers()
                )
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
    for fixed, per_sample in sorted(set(points), key=lambda point: (-point[1], -point[0])):
        if not best or fixed > max(line[0] for line in best):
            best.append((fixed, per_sample))
    return tuple(best)


def trace_step(
    model: Any,
    loss_fn: Any,
    batch: int,
    label_shape: tuple[int, ...] = (),
    label_dtype: str = "int32",
    dataset: Any = None,
    y_spec: Any = None,
    element: Any = None,
) -> StepTrace:
    """Trace forward + loss + gradients at a static batch and measure its liveness peak.
    With a `dataset`, its element shapes give the inputs and labels (a subclassed model
    declares none; `element`: their spec with every dimension known, where the
    dataset's own leaves some out); else the model's inputs and `y_spec` (several
    outputs) or the label shape."""
    tf = import_tensorflow()

    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            pred = model(x, training=True)
            if y is None:  # inputs alone: the model's own train_step holds the loss; the
                # mean of its outputs takes the same backward pass through the model
                outs = tf.nest.flatten(pred)
                loss = tf.add_n([tf.reduce_mean(tf.cast(output, tf.float32)) for output in outs])
            else:
                loss = tf.reduce_mean(loss_fn(y, pred))
        return tape.gradient(loss, model.trainable_variables)

    traced = tf.function(_in_replica(model, step))
    from tfaccel.workloads.synthetic import dataset_specs, input_specs

    if dataset is not None:
        x_specs, y_spec = dataset_specs(dataset, batch, element)
    else:
        x_specs = input_specs(model, batch)
        if y_spec is None:
            y_spec = tf.TensorSpec([batch, *label_shape], dtype=label_dtype)
    return _step_trace(batch, traced.get_concrete_function(x_specs, y_spec).graph)


def trace_own_step(model: Any, dataset: Any, batch: int, element: Any = None) -> StepTrace:
    """Trace the model's own `train_step` as fit runs it, on a batch of `dataset`'s
    elements, and measure its liveness peak: a GAN's (keras-io's WGAN-GP: its critic's
    steps, the gradient penalty, its generator's step, each with its optimizer's update)
    whole, where forward + loss + gradients (`trace_step`) would miss most of it or,
    without a `call`, fail. `element`: as `trace_step`'s."""
    tf = import_tensorflow()
    from tfaccel.workloads.synthetic import at_batch

    spec = at_batch(dataset.element_spec if element is None else element, batch)
    traced = tf.function(_in_replica(model, model.train_step))
    return _step_trace(batch, traced.get_concrete_function(spec).graph)


def _step_trace(batch: int, graph: Any) -> StepTrace:
    curve, saved, unknown = live_curve(graph, graph.outputs)
    return StepTrace(batch, max(curve), saved, len(graph.get_operations()), unknown, tuple(curve))


def combined(
    estimates: Sequence[MemoryEstimate],
    models: Sequence[Any],
    workload: str,
    rows: Sequence[int] | None = None,
) -> MemoryEstimate:
    """The estimate of a script that trains several models (`estimates`, each of one of
    `models`), at the first one's batch: their weights counted once each (a model may
    hold another's layers), their optimizers' slots added up. Without `rows`, one step
    trains them together (a GAN's tf.function, a tape and an optimizer each), holding
    their gradients and live buffers at once (each model's forward pass kept for its
    tape's gradient): those add up. With `rows` (each model's batch), each trains in a
    step of its own, one after another (a loop's train_on_batch calls): the largest
    step counts, each model's cost per sample scaled by its rows to the first's (a
    discriminator trained on real and generated rows)."""
    together = rows is None
    scales = [1.0] * len(estimates) if rows is None else [r / rows[0] for r in rows]
    add = sum if together else max
    parameters, weights_bytes = _weights_once(models)
    # trainable in some model's step (as each was traced: a discriminator frozen inside
    # the combined model is trained in its own step)
    trainable = min(parameters, sum(e.trainable_parameters for e in estimates))
    return MemoryEstimate(
        workload=workload,
        precision=estimates[0].precision,
        optimizer=optimizer_names([estimate.optimizer for estimate in estimates]),
        parameters=parameters,
        trainable_parameters=trainable,
        weights_bytes=weights_bytes,
        optimizer_bytes=sum(estimate.optimizer_bytes for estimate in estimates),
        gradients_bytes=add(estimate.gradients_bytes for estimate in estimates),
        step_lines=_step_lines(estimates, scales, together),
        activations_bytes_per_sample=add(
            round(e.activations_bytes_per_sample * k)
            for e, k in zip(estimates, scales, strict=True)
        ),
        traces=tuple(
            StepTrace(
                parts[0].batch,
                add(t.peak_bytes for t in parts),
                add(t.saved_for_backward_bytes for t in parts),
                sum(t.ops for t in parts),
                sum(t.unknown_shape_tensors for t in parts),
            )
            for parts in zip(*(estimate.traces for estimate in estimates), strict=True)
        ),
        method="liveness of each model's traced training step, "
        + ("added up (one step trains them)" if together else "the largest (a step each)"),
    )


def _step_lines(
    estimates: Sequence[MemoryEstimate], scales: Sequence[float], together: bool
) -> tuple[tuple[int, int], ...]:
    """The step lines of several steps, each's cost per sample scaled: of the sum of
    their peaks (each peak is a max of lines, and the sum of such maxes is the max of
    the lines' sums), or of the largest (all their lines)."""
    lines: list[tuple[int, int]] = [(0, 0)] if together else []
    for estimate, k in zip(estimates, scales, strict=True):
        own = [(f, round(p * k)) for f, p in estimate.step_lines]
        lines = [(f + g, p + q) for f, p in lines for g, q in own] if together else lines + own
    return pareto_lines(lines)


def _weights_once(models: Sequence[Any]) -> tuple[int, int]:
    """Parameters and weight bytes of `models`, each variable once."""
    weights = _once(w for model in models for w in model.weights)
    return _count(weights), _bytes(weights)


def _once(variables: Iterable[Any]) -> list[Any]:
    """`variables`, each once (by identity: a model may hold another's)."""
    return list({id(v): v for v in variables}.values())


def _count(variables: Iterable[Any]) -> int:
    """The values `variables` hold."""
    return sum(int(math.prod(v.shape)) for v in variables)


def _bytes(variables: Iterable[Any]) -> int:
    """The bytes `variables` take, each at its own dtype."""
    return sum(int(math.prod(v.shape)) * _dtype_size(v.dtype) for v in variables)


def _optimizer_bytes(optimizer: Any, variables: Sequence[Any]) -> tuple[int, str]:
    from tfaccel.optimize.report import keras_optimizer

    opt = keras_optimizer(optimizer)
    name = type(opt).__name__
    inner = getattr(opt, "inner_optimizer", None)  # a LossScaleOptimizer's
    if inner is not None:
        name = f"{name}({type(inner).__name__})"
    built = getattr(opt, "built", False)
    if not built:
        opt.build(variables)
    return _bytes(opt.variables), name


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
        optimizer: overrides the workload's optimizer (a Keras name or instance), not
            the optimizers of a model's own train_step (`_traces`).
        batches: the two static batch sizes traced.
    """
    if precision not in PRECISIONS:
        raise InputError(
            "Unknown precision",
            expected="one of " + ", ".join(PRECISIONS),
            received=f"precision={precision!r}",
        )
    import keras

    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(precision)
    try:
        workload = build()
        with _strategy_scope(workload.model):
            return _estimate(workload, precision, optimizer, batches)
    finally:
        keras.mixed_precision.set_global_policy(previous)


def _in_replica(model: Any, step: Callable[..., Any]) -> Callable[..., Any]:
    """`step` run in a replica of the strategy the model was built under, as fit runs
    it (a MirroredStrategy's variables are read there only), else `step` itself. The
    plan's process sees one device: one replica, at the whole batch."""
    strategy = _strategy_of(model)
    if strategy is None:
        return step
    return lambda *args: strategy.run(step, args=args)


def _strategy_scope(model: Any) -> Any:
    """The scope of the distribution strategy the model was built under (a script's
    MirroredStrategy: its optimizer's slots are built, and its step traced, there as
    fit does it), else none."""
    import contextlib

    strategy = _strategy_of(model)
    return strategy.scope() if strategy is not None else contextlib.nullcontext()


def _strategy_of(model: Any) -> Any:
    """The distribution strategy the model was built under, or None. Keras' TensorFlow
    trainer keeps it only where one was in scope (its public `distribute_strategy`
    falls back to the default one)."""
    return getattr(model, "_distribute_strategy", None)


def _estimate(
    workload: Any, precision: str, optimizer: Any, batches: tuple[int, int]
) -> MemoryEstimate:
    """`estimate_memory`'s work, under the precision policy and the model's strategy."""
    from tfaccel.workloads.synthetic import example_spec

    model = workload.model
    element, shapes = (None, None)
    if workload.dataset is not None:
        element, shapes = example_spec(workload.dataset)
    traces, own = _traces(workload, batches, element)
    trainable = [weight for weight in model.trainable_weights]
    if own:  # the step applies its own optimizers: another cannot stand in
        opt_bytes, opt_name = _own_optimizers_bytes(model)
        opt_name += " (its train_step's own)" if optimizer else ""
    else:
        opt_bytes, opt_name = _optimizer_bytes(optimizer or workload.optimizer, trainable)
    lines, saved = _lines(traces)
    parameters, weights_bytes = _weights_once([model])
    return MemoryEstimate(
        workload=workload.name,
        precision=precision,
        optimizer=opt_name,
        parameters=parameters,
        trainable_parameters=_count(trainable),
        weights_bytes=weights_bytes,
        optimizer_bytes=opt_bytes,
        gradients_bytes=_count(trainable) * 4,
        step_lines=lines,
        activations_bytes_per_sample=saved,
        traces=traces,
        **({"method": OWN_STEP} if own else {}),
        shapes=shapes,
    )


OWN_STEP = "liveness of the model's own traced train_step"


def _traces(
    workload: Any, batches: tuple[int, int], element: Any
) -> tuple[tuple[StepTrace, ...], bool]:
    """The step traced at each batch, and whether it is the model's own `train_step`:
    that one, as fit runs it, where the model has one and the workload its data; else
    (or where that fails to trace and the other does) forward, loss and gradients."""
    from tfaccel.trial.race import own_step
    from tfaccel.workloads.loss import per_example_loss
    from tfaccel.workloads.synthetic import label_specs

    model = workload.model
    failed: Exception | None = None
    if own_step(model, "train_step") is not None and workload.dataset is not None:
        try:
            own = (trace_own_step(model, workload.dataset, b, element) for b in batches)
            return tuple(own), True
        except Exception as exc:
            failed = exc
    loss_fn = per_example_loss(workload.loss)
    try:
        return tuple(
            trace_step(
                model,
                loss_fn,
                b,
                dataset=workload.dataset,
                y_spec=label_specs(workload, b),
                element=element,
            )
            for b in batches
        ), False
    except Exception as second:
        if failed is not None:
            raise failed from second
        raise


def _lines(traces: tuple[StepTrace, ...]) -> tuple[tuple[tuple[int, int], ...], int]:
    """The step's (fixed, per-sample) lines and the bytes saved for backward per sample,
    from its traces at two batches."""
    small, large = traces
    batch_small, batch_large = small.batch, large.batch
    if len(small.curve) == len(large.curve):
        points = []
        for bytes_small, bytes_large in zip(small.curve, large.curve, strict=True):
            weight = max(0, (bytes_large - bytes_small) // (batch_large - batch_small))
            points.append((max(0, bytes_small - weight * batch_small), weight))
        lines = pareto_lines(points)
    else:  # the two traces differ in structure: fall back to the two peaks
        weight = max(0, (large.peak_bytes - small.peak_bytes) // (batch_large - batch_small))
        lines = ((max(0, small.peak_bytes - weight * batch_small), weight),)
    saved = max(
        0,
        (large.saved_for_backward_bytes - small.saved_for_backward_bytes)
        // max(1, batch_large - batch_small),
    )
    return lines, saved


def _own_optimizers_bytes(model: Any) -> tuple[int, str]:
    """The slots of the optimizers a model's own train_step built as it traced (its
    compiled one, those it holds: a GAN's two), each variable once."""
    import keras

    held = [getattr(model, "optimizer", None), *vars(model).values()]
    built = [
        o for o in held if isinstance(o, keras.optimizers.Optimizer) and getattr(o, "built", False)
    ]
    total = _bytes(_once(v for o in built for v in o.variables))
    return total, optimizer_names([type(o).__name__ for o in built]) or "none applied"


def optimizer_names(names: Sequence[str]) -> str:
    """Several optimizers as one name: "Adam + SGD", "Adam x2" (a GAN's two)."""
    counts = Counter(names)
    return " + ".join(f"{name} x{n}" if n > 1 else name for name, n in counts.items())
