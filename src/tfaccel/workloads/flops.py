"""Matrix-multiply and convolution FLOPs of a model's forward pass, counted from its graph.

What throughput means against the GPU's peak: a training step costs about three forward
passes of these FLOPs (the backward pass computes two products per forward product:
the input's gradient and the weights'), so

    model TFLOP/s = 3 x forward FLOPs per sample x samples/s / 1e12

the usual "model FLOPs utilization" numerator. Only the products are counted (MatMul,
BatchMatMul, Einsum, convolutions): they are what tensor cores run; elementwise work,
normalizations and reductions are left out, as they are in published MFU figures.
"""

from __future__ import annotations

import math
from typing import Any

from tfaccel._tf import import_tensorflow


def _dims(shape: Any) -> list[int] | None:
    dims = shape.as_list() if shape.rank is not None else None
    return None if dims is None or any(dim is None for dim in dims) else dims


def einsum_flops(equation: str, shapes: list[list[int]]) -> int:
    """2 x the product of every index's size, for a two-operand einsum (0 otherwise: a
    one-operand einsum is a transpose or a reduction)."""
    lhs = equation.replace(" ", "").split("->")[0]
    terms = lhs.split(",")
    if len(terms) != 2 or len(shapes) != 2 or "." in lhs:
        return 0
    size: dict[str, int] = {}
    for term, dims in zip(terms, shapes, strict=True):
        if len(term) != len(dims):
            return 0
        for index, dim in zip(term, dims, strict=True):
            size[index] = max(size.get(index, 1), dim)
    return 2 * math.prod(size.values())


def op_flops(operation: Any) -> int | None:
    """FLOPs of one graph op (None: a product whose shapes are not known; 0: not a
    product)."""
    kind = operation.type
    if kind not in PRODUCTS:
        return 0
    ins = [_dims(tensor.shape) for tensor in operation.inputs]
    out = _dims(operation.outputs[0].shape)
    if out is None or any(x is None for x in ins[:2]):
        return None
    lhs, rhs = ins[0], ins[1]
    assert lhs is not None and rhs is not None
    if kind == "MatMul":
        contracted = lhs[0] if operation.get_attr("transpose_a") else lhs[1]
        return 2 * math.prod(out) * contracted
    if kind.startswith("BatchMatMul"):
        contracted = lhs[-2] if operation.get_attr("adj_x") else lhs[-1]
        return 2 * math.prod(out) * contracted
    if kind == "Einsum":
        return einsum_flops(operation.get_attr("equation").decode(), [lhs, rhs])
    if kind == "DepthwiseConv2dNative":  # filter [kh, kw, in, multiplier]
        return 2 * math.prod(out) * rhs[0] * rhs[1]
    # Conv2D / Conv3D: filter [spatial..., in / groups, out]
    return 2 * math.prod(out) * math.prod(rhs[:-1])


# Matrix products (what cuBLAS runs); with the convolutions, every product counted.
GEMM_OPS = frozenset({"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum"})
PRODUCTS = GEMM_OPS | {"Conv2D", "Conv3D", "DepthwiseConv2dNative"}


def graph_flops(graph: Any) -> tuple[int, int]:
    """(FLOPs of the products in `graph` and the functions it calls, products whose
    shapes were unknown)."""
    total, _, unknown = graph_flops_split(graph)
    return total, unknown


def graph_flops_split(graph: Any) -> tuple[int, int, int]:
    """(FLOPs of the products in `graph` and the functions it calls, of those the
    matrix products' (MatMul, BatchMatMul, Einsum; the rest are convolutions), products
    whose shapes were unknown)."""
    total, gemm, unknown = 0, 0, 0
    seen: set[str] = set()

    def walk(graph: Any) -> None:
        nonlocal total, gemm, unknown
        for operation in graph.get_operations():
            flops = op_flops(operation)
            if flops is None:
                unknown += 1
            else:
                total += flops
                if operation.type in GEMM_OPS:
                    gemm += flops
        for name, function in getattr(graph, "_functions", {}).items():
            if name not in seen and hasattr(function, "graph"):
                seen.add(name)
                walk(function.graph)

    walk(graph)
    return total, gemm, unknown


def forward_flops(model: Any, batch: int = 2) -> tuple[int | None, float | None]:
    """(Product FLOPs of one forward pass (training=False) per sample, the matrix
    products' share of them), traced at `batch` with the model's declared input shapes;
    (None, None) where a product's shape is unknown."""
    from tfaccel.workloads.synthetic import input_specs

    tf = import_tensorflow()
    specs = input_specs(model, batch)
    graph = tf.function(lambda x: model(x, training=False)).get_concrete_function(specs).graph
    total, gemm, unknown = graph_flops_split(graph)
    if not total or unknown:
        return None, None
    return total // batch, gemm / total


def held_models(model: Any) -> list[Any]:
    """The models that `model` holds as its own layers (a GAN's generator and critic)."""
    import keras

    return [
        layer
        for layer in model._flatten_layers(include_self=False, recursive=False)
        if isinstance(layer, keras.Model)
    ]


def sub_models_gemm_share(model: Any) -> float | None:
    """The matrix products' share of the product FLOPs of the models that `model`
    holds, each traced as `forward_flops` does, for a model with no forward pass of
    its own (a GAN's, whose `train_step` runs its generator and discriminator); None
    where it holds none, or one's products are not known. Each sub-model's forward
    pass counts once: the share says which kind of product the model runs mostly."""
    total = gemm = 0.0
    for sub in held_models(model):
        try:
            flops, share = forward_flops(sub)
        except Exception:  # a sub-model without declared inputs: nothing to trace
            return None
        if flops is None or share is None:
            return None
        total, gemm = total + flops, gemm + flops * share
    return gemm / total if total else None


def forward_flops_per_sample(model: Any, batch: int = 2) -> int | None:
    """Product FLOPs of one forward pass (training=False) per sample (forward_flops)."""
    return forward_flops(model, batch)[0]
