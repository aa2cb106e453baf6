"""Gradient checkpointing that works for every Keras layer on the TensorFlow backend.

`keras.RematScope` wraps each layer's call in `keras.remat`, which on TensorFlow is
`tf.recompute_grad`. Its `custom_gradient` refuses keyword arguments outside eager mode
("supports keywords arguments only when eager execution is enabled"), and Keras calls
every layer that takes `training` with `training=...`: BatchNormalization and Dropout,
so ResNet-50, BERT and most real models fail on their first training step.

It refuses other things too: Keras' `GetItem` operation (`x[:, 0]`, BERT's pooled
output) passes its slices positionally, and `recompute_grad` converts every positional
argument to a tensor. And where it runs, dropout in the recomputed pass draws new
masks, so the gradient is of another network.

`install()` gives Keras a `remat` that takes every floating tensor out of the
arguments, nested or not, as a positional argument of the recomputed function (so
gradients still flow to it), binds everything else (`training`, slices, None, bool
masks, integer ids) into it, and replays the layer's random seeds and its autocast
scope (mixed precision failed with "float32 does not match bfloat16") in the
recomputation. It replaces only the TensorFlow backend's function, once per process.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from dataclasses import dataclass
from typing import Any

from tfaccel._tf import import_tensorflow

_MARK = "_tfaccel_remat"


def _seed_generators(layers: Any) -> list[Any]:
    """The Keras SeedGenerators of `layers` and of every layer inside them (Dropout's,
    KerasHub's); objects that are not layers have none."""
    return [
        generator
        for owner in layers
        for layer in getattr(owner, "_flatten_layers", lambda: ())()
        for generator in getattr(layer, "_seed_generators", ())
    ]


def remat(call_fn: Any, layers: Any = None) -> Any:
    """`tf.recompute_grad(f)` for any call: every floating tensor in the arguments, nested
    or not, positional or keyword, becomes a positional argument of the recomputed
    function (so gradients flow to it); everything else (`training=True`, a slice, None,
    a bool mask, token ids) is bound.

    `layers`: the layers `f` calls, where `f` is not a layer's own call (their random
    seeds are replayed).

    The recomputation draws the same random numbers as the forward pass: the layer's
    seed generators are set back to their state before the forward pass while it runs,
    and to their state before the recomputation after it. Otherwise dropout would drop
    other units in the recomputed pass, and the gradient would be of another network.
    It also runs under the forward pass's autocast scope: under a mixed policy Keras
    casts the float32 variables to the compute dtype only inside the layer's call, and
    the recomputation runs later, in the backward pass, outside it.
    """
    tf = import_tensorflow()
    from keras.src import backend as keras_backend

    # A layer's own call, or a function that calls `layers` (a segment of a graph).
    generators = _seed_generators(
        [getattr(call_fn, "__self__", None)] if layers is None else layers
    )

    @functools.wraps(call_fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        structure = (args, kwargs)
        leaves = tf.nest.flatten(structure)
        # Floating tensors only: a bool or integer one (a padding mask, token ids) has
        # no gradient, and recompute_grad would try to make one for it.
        is_tensor = [
            isinstance(x, tf.Tensor) and (x.dtype.is_floating or x.dtype.is_complex) for x in leaves
        ]
        scope = keras_backend.get_autocast_scope()
        autocast = scope.dtype if scope is not None else None
        before: list[Any] = []  # the seed states the forward pass started from

        def bound(*tensors: Any) -> Any:
            with keras_backend.AutocastScope(autocast):
                return replay(*tensors)

        def replay(*tensors: Any) -> Any:
            given = iter(tensors)
            filled = [next(given) if t else x for x, t in zip(leaves, is_tensor, strict=True)]
            call_args, call_kwargs = tf.nest.pack_sequence_as(structure, filled)
            if not generators:
                return call_fn(*call_args, **call_kwargs)
            now = [tf.identity(generator.state.value) for generator in generators]
            if not before:  # the forward pass
                before.extend(now)
                return call_fn(*call_args, **call_kwargs)
            for generator, state in zip(generators, before, strict=True):  # the recomputation
                generator.state.assign(state)
            out = call_fn(*call_args, **call_kwargs)
            for generator, state in zip(generators, now, strict=True):
                generator.state.assign(state)
            return out

        return tf.recompute_grad(bound)(*(x for x, t in zip(leaves, is_tensor, strict=True) if t))

    setattr(call, _MARK, True)
    return call


def install() -> bool:
    """Make Keras' TensorFlow backend use `remat` above. True if it is in place (now or
    before); False on another backend, where Keras' own remat has no such limit."""
    import keras

    if keras.backend.backend() != "tensorflow":
        return False
    from keras.src import backend as keras_backend

    core = keras_backend.core
    if getattr(core.remat, _MARK, False):
        return True
    wrapped = functools.wraps(core.remat)(lambda fn_to_wrap: remat(fn_to_wrap))
    setattr(wrapped, _MARK, True)
    core.remat = wrapped
    return True


# Checkpointing by segments of a functional graph.
#
# `keras.RematScope` recomputes each layer on its own. A layer's input is the previous
# layer's output, which the forward pass keeps anyway, so a model built from single
# operations (Conv2D, BatchNormalization, ReLU: ResNet-50) saves nothing that way and
# pays for the copies (ResNet-50's peak grows with it). What saves memory is to keep
# only a few tensors of the forward pass, at the boundaries of segments of many
# layers, and to recompute one segment at a time
# in the backward pass (Chen et al. 2016, "Training deep nets with sublinear memory
# cost"; torch.utils.checkpoint.checkpoint_sequential does the same for a Sequential).

# A Keras Functional model with fewer nodes than this is left to its layers.
MIN_NODES = 8


@dataclass(frozen=True)
class Segment:
    """Nodes run one after the other; `inputs`: ids of the reference tensors they read
    from before the segment, `outputs`: those they make that later nodes (or the model's
    outputs) read."""

    nodes: tuple[Any, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class CheckpointPlan:
    """Where a functional model was cut: `segments` of `sizes` nodes, each recomputed in
    the backward pass but the last."""

    model: str
    nodes: int
    segments: tuple[Segment, ...]
    kept: float  # estimated share of the activation memory the backward pass holds at once

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(len(segment.nodes) for segment in self.segments)

    def describe(self) -> str:
        return (
            f"{self.model}: {len(self.segments)} segments of {self.nodes} nodes, about "
            f"{self.kept:.0%} of the activations held at once"
        )


def _ordered_nodes(model: Any) -> list[Any]:
    """The model's nodes in the order its call runs them (deepest first), inputs left out."""
    by_depth = model._nodes_by_depth
    return [
        node
        for depth in sorted(by_depth, reverse=True)
        for node in by_depth[depth]
        if node.operation is not None and not node.is_input
    ]


def _elements(tensor: Any) -> int:
    """Elements per example of a reference tensor (unknown dimensions count 1)."""
    count = 1
    for dim in tuple(tensor.shape)[1:]:
        count *= dim or 1
    return count


def _inner_layers(node: Any) -> int:
    flatten = getattr(node.operation, "_flatten_layers", None)
    return max(1, len(list(flatten(include_self=False)))) if flatten else 1


def plan_segments(model: Any, segments: int | None = None) -> CheckpointPlan | None:
    """Cut `model`'s graph into `segments` parts at places where a single floating
    tensor crosses, balanced by the activation memory each part keeps. By default the
    number of parts whose estimated peak (the tensors kept between parts plus the
    largest part) is lowest: about the square root of the node count for a graph of
    single operations, a part per block for one of transformer blocks.

    None when the model has no graph to cut: not a Functional model, fewer than
    MIN_NODES nodes, or no place where one tensor crosses alone (every cut would keep
    as much as it saves)."""
    if not hasattr(model, "_nodes_by_depth") or not hasattr(model, "inputs"):
        return None
    nodes = _ordered_nodes(model)
    if len(nodes) < MIN_NODES:
        return None
    last_use: dict[int, int] = {}
    floating: dict[int, bool] = {}
    for i, node in enumerate(nodes):
        for tensor in node.input_tensors:
            last_use[id(tensor)] = i
        for tensor in node.outputs:
            floating[id(tensor)] = "float" in str(tensor.dtype)
    end = len(nodes)
    for tensor in model.outputs:
        last_use[id(tensor)] = end
    # The tensors live after each node, made by the graph (the model's own inputs are
    # bound to every segment): a cut is possible where exactly one, floating, crosses.
    live: set[int] = set()
    cuts: list[int] = []
    for i, node in enumerate(nodes):
        live |= {id(tensor) for tensor in node.outputs if last_use.get(id(tensor), -1) > i}
        live = {tensor for tensor in live if last_use.get(tensor, -1) > i}
        if i < end - 1 and len(live) == 1 and all(floating.get(tensor, False) for tensor in live):
            cuts.append(i)
    if not cuts:
        return None
    if segments is not None and segments < 2:
        raise ValueError(f"segments must be 2 or more, got {segments}")
    # What each node keeps for its backward pass, per example: its outputs, times the
    # layers inside it (a transformer block keeps far more than its output).
    made = [
        sum(_elements(tensor) for tensor in node.outputs) * _inner_layers(node) for node in nodes
    ]
    running = list(itertools.accumulate(made))
    crossing = {i: sum(_elements(tensor) for tensor in nodes[i].outputs) for i in cuts}

    at_cut = [running[cut] for cut in cuts]  # increasing

    def choose(parts: int) -> list[int]:
        """The cut nearest each 1/parts of the running total: balanced segments."""
        picked = set()
        for j in range(1, parts):
            target = running[-1] * j / parts
            i = bisect.bisect_left(at_cut, target)
            near = [x for x in (i - 1, i) if 0 <= x < len(cuts)]
            picked.add(cuts[min(near, key=lambda x: abs(at_cut[x] - target))])
        return sorted(picked)

    def peak(chosen: list[int]) -> int:
        """Kept between segments, plus the largest segment recomputed at once."""
        edges = [-1, *chosen, end - 1]
        return sum(crossing[cut] for cut in chosen) + max(
            running[stop] - (running[start] if start >= 0 else 0)
            for start, stop in itertools.pairwise(edges)
        )

    if segments is not None:
        chosen = choose(segments)
    else:
        chosen = min((choose(count) for count in range(2, min(len(cuts), 256) + 2)), key=peak)
    bounds = [-1, *chosen, end - 1]
    model_outputs = {id(x) for x in model.outputs}
    parts: list[Segment] = []
    for start, stop in itertools.pairwise(bounds):
        seg_nodes = nodes[start + 1 : stop + 1]
        made_here = {id(tensor) for seg_node in seg_nodes for tensor in seg_node.outputs}
        ins: list[int] = []
        for seg_node in seg_nodes:
            for tensor in seg_node.input_tensors:
                if id(tensor) not in made_here and id(tensor) not in ins:
                    ins.append(id(tensor))
        outs = [
            tensor
            for tensor in made_here
            if last_use.get(tensor, -1) > stop or tensor in model_outputs
        ]
        parts.append(Segment(tuple(seg_nodes), tuple(ins), tuple(sorted(outs))))
    return CheckpointPlan(
        getattr(model, "name", type(model).__name__),
        len(nodes),
        tuple(parts),
        peak(chosen) / running[-1] if running[-1] else 1.0,
    )


def _segmented_run(model: Any, plan: CheckpointPlan, original: Any) -> Any:
    """A `_run_through_graph` for `model` that runs `plan`'s segments, each but the last
    through `remat`. Symbolic calls (building an outer model) take the original path."""
    import keras
    from keras import tree

    def layers_of(seg: Segment) -> list[Any]:
        return [
            node.operation for node in seg.nodes if isinstance(node.operation, keras.layers.Layer)
        ]

    owners = [layers_of(part) for part in plan.segments]
    get_op = getattr(model, "_get_operation_for_node", lambda node: node.operation)

    def run(inputs: Any, operation_fn: Any = lambda op: op, call_fn: Any = None) -> Any:
        flat = tree.flatten(inputs)
        if call_fn is not None or any(isinstance(x, keras.KerasTensor) for x in flat):
            return original(inputs, operation_fn=operation_fn, call_fn=call_fn)
        values: dict[int, Any] = {id(x): y for x, y in zip(model.inputs, flat, strict=True)}

        for index, seg in enumerate(plan.segments):

            def segment(*given: Any, seg: Segment = seg) -> list[Any]:
                local = dict(zip(seg.inputs, given, strict=True))
                for node in seg.nodes:
                    args, kwargs = node.arguments.fill_in(local)
                    out = operation_fn(get_op(node))(*args, **kwargs)
                    for x, y in zip(node.outputs, tree.flatten(out), strict=True):
                        local[id(x)] = y
                return [local[tensor] for tensor in seg.outputs]

            given = [values[tensor] for tensor in seg.inputs]
            last = index == len(plan.segments) - 1
            got = segment(*given) if last else remat(segment, layers=owners[index])(*given)
            values.update(zip(seg.outputs, tree.flatten(got), strict=True))
        return tree.pack_sequence_as(model._outputs_struct, [values[id(x)] for x in model.outputs])

    return run


def checkpoint(model: Any, segments: int | None = None) -> list[CheckpointPlan]:
    """Checkpoint `model` by segments, in place: the largest Functional graphs in it (the
    model itself, or the backbone inside a task model) run in segments, each recomputed
    in the backward pass, so the forward pass keeps only the tensors between segments.
    Per-layer recomputation (a model built inside a RematScope) is switched off where
    segments apply. Returns the plans applied, [] where no graph could be cut (a
    subclassed model: build it inside `report.remat_scope()` instead). Call it before
    the first training step (`report.compile` does)."""
    install()
    applied: list[CheckpointPlan] = []

    def visit(layer: Any) -> None:
        # A Sequential runs the Functional graph it builds for itself.
        graph = getattr(layer, "_functional", None) or layer
        if getattr(graph, "_tfaccel_segments", None) is not None:
            applied.append(graph._tfaccel_segments)
            return
        plan = plan_segments(graph, segments)
        if plan is not None:
            original = graph._run_through_graph
            graph._run_through_graph = _segmented_run(graph, plan, original)
            graph._tfaccel_segments = plan
            applied.append(plan)
            return
        for child in layer._flatten_layers(include_self=False, recursive=False):
            visit(child)

    visit(model)
    if applied:
        # Segments replace per-layer recomputation (a model built inside a RematScope):
        # a layer recomputed alone inside a recomputed segment only costs more.
        for layer in model._flatten_layers(include_self=True):
            layer._remat_mode = None
        for plan in applied:
            for seg in plan.segments:
                for node in seg.nodes:
                    node.operation._remat_mode = None
    return applied
