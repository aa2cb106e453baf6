"""Kernels and XLA ops by name and type: which use tensor cores or 16-bit types, the
operand types of an HLO expression, and op-type totals."""

from __future__ import annotations

import re
from typing import Any

from tfaccel.profile.report import TopItem
from tfaccel.workloads.flops import GEMM_OPS

# Kernels that run on tensor cores, by name: cuDNN/cuBLAS xmma and gmma kernels and
# CUTLASS tensor-op kernels name their types (bf16, f16, tf32, i8, e4m3); HMMA/IMMA,
# wgmma and the 884/1688/16816 tile shapes are tensor-core instructions. XProf's own
# flag misses cuDNN 9's xmma and CUTLASS implicit-GEMM kernels on Hopper.
# cuBLAS 12.8+ on Hopper names its GEMMs nvjet_sm90_... without their types; they are
# tensor-core (wgmma) kernels, and XProf's flag misses them too.
TC_NAME = re.compile(
    r"(xmma|gmma|cutlass|tensorop).*(bf16|f16|fp16|tf32|i8|e4m3|e5m2)"
    r"|hmma|imma|wgmma|h884|h1688|h16816|s1688|s16816|tensorop_[sh]|^nvjet_",
    re.IGNORECASE,
)
SIXTEEN_BIT_NAME = re.compile(r"bf16|f16|fp16|half|hmma|h884|h1688|h16816|e4m3|e5m2", re.I)


def uses_tensor_cores(kernel_name: str) -> bool:
    return bool(TC_NAME.search(kernel_name))


_DTYPE = re.compile(r"\b(bf16|f16|f8e4m3fn|f8e5m2|f32|f64|tf32)\[")


def _closing(text: str, start: int) -> int:
    """The index of the parenthesis that closes the one at `start` (len(text) if none)."""
    depth = 0
    for j in range(start, len(text)):
        depth += text[j] == "("
        depth -= text[j] == ")"
        if depth == 0:
            return j
    return len(text)


def hlo_operand_types(expression: str) -> list[str]:
    """The floating-point types of an HLO op's operands, from its text as XProf's
    hlo_stats shows it: `%name = RESULT op(OPERANDS), attributes`."""
    rhs = expression.split(" = ", 1)[-1]
    # A tuple result is in parentheses: the operands open after it.
    after_result = _closing(rhs, 0) + 1 if rhs.startswith("(") else 0
    start = rhs.find("(", after_result)
    if start < 0:
        return []
    return _DTYPE.findall(rhs[start + 1 : _closing(rhs, start)])


SIXTEEN_BIT_TYPES = ("bf16", "f16", "f8e4m3fn", "f8e5m2")
RESULT_TYPE = re.compile(r"=\s*\(?\s*([a-z][a-z0-9]*)\[")


# A BatchMatMulV2 gradient's sum over broadcast batch dimensions: "P/MatMul/Sum_1".
BROADCAST_SUM = re.compile(r"/MatMul/Sum(_1)?$")


def _tf_op_type(row: dict[str, Any]) -> str:
    """The TensorFlow op type an XLA op came from ("scope/MatMul:MatMul" -> MatMul)."""
    return str(row.get("tf_op_name") or "").rsplit(":", 1)[-1]


def _expanded_dot(row: dict[str, Any]) -> bool:
    """An XLA op of a TensorFlow matrix product that is not a GEMM: the multiply or the
    reduction that XLA's dot-strength-reduction pass makes of a small vector x matrix
    product (GEMMs are cuBLAS custom calls or gemm fusions)."""
    name = str(row.get("hlo_op_name") or "")
    return (
        _tf_op_type(row) in GEMM_OPS
        and str(row.get("category")) != "custom-call"
        and "gemm" not in name
        and ("reduce" in name or "multiply" in name)
    )


def _cast_to_16_bit(row: dict[str, Any]) -> bool:
    """A TensorFlow Cast that XLA runs as a float32 -> 16-bit conversion: under a mixed
    policy, what each float32 weight costs at every use."""
    expression = str(row.get("hlo_op_expression") or "")
    result = RESULT_TYPE.search(expression)
    return (
        _tf_op_type(row) == "Cast"
        and result is not None
        and result.group(1) in SIXTEEN_BIT_TYPES
        and "f32" in hlo_operand_types(expression)
    )


def _broadcast_grad_ops(rows: list[dict[str, Any]]) -> set[int]:
    """The rows (indices) of gradients of batched products with a broadcast operand:
    TensorFlow's BatchMatMulV2 gradient computes such an operand's gradient per batch
    element ("P/MatMul_1", or "P/MatMul" for the left one) and sums it over the batch
    ("P/Sum_1", "P/Sum"). Keras' einsum runs every EinsumDense projection this way
    (tfaccel.optimize.einsum). A product is counted only with its sum: batched products
    of equal batches (attention's) have none."""
    names = [str(op_row.get("tf_op_name") or "").rsplit(":", 1)[0] for op_row in rows]
    picked: set[int] = set()
    products: set[str] = set()
    for i, (name, row) in enumerate(zip(names, rows, strict=True)):
        match = BROADCAST_SUM.search(name)
        if match and _tf_op_type(row) == "Sum":
            picked.add(i)
            products.add(name[: match.start()] + "/MatMul/MatMul" + (match.group(1) or ""))
    picked.update(i for i, name in enumerate(names) if name in products)
    return picked


def xla_op_facts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """From XProf's hlo_stats rows (one per XLA op): the share of XLA op time whose
    operands are 16-bit floats (what XProf's own 16-bit figure misses under XLA: it
    counts TensorFlow ops, and XLA fuses them away), the time by op category, and the
    shares of two costs settings remove: matrix products XLA expanded into elementwise
    work instead of GEMMs, and float32 -> 16-bit casts."""
    total = sum(float(row.get("total_self_time") or 0) for row in rows)
    if not total:
        return {}
    by_category: dict[str, float] = {}
    sixteen = compute = expanded = casts = broadcast = 0.0
    broadcast_rows = _broadcast_grad_ops(rows)
    for i, row in enumerate(rows):
        self_time = float(row.get("total_self_time") or 0)
        cat = str(row.get("category") or "other")
        by_category[cat] = by_category.get(cat, 0.0) + self_time
        if cat.startswith("_"):  # _Recv / _Send: TensorFlow's copies in and out, not compute
            continue
        compute += self_time
        types = hlo_operand_types(str(row.get("hlo_op_expression") or ""))
        if any(x in SIXTEEN_BIT_TYPES for x in types):
            sixteen += self_time
        if i in broadcast_rows:
            broadcast += self_time
        if _expanded_dot(row):
            expanded += self_time
        elif _cast_to_16_bit(row):
            casts += self_time
    share = (lambda x: 100.0 * x / compute) if compute else (lambda x: 0.0)
    return {
        "xla_16bit_pct": share(sixteen),
        "xla_expanded_matmul_pct": share(expanded),
        "xla_cast_to_16bit_pct": share(casts),
        "xla_broadcast_grad_pct": share(broadcast),
        "xla_op_categories_pct": {
            category: 100.0 * micros / total
            for category, micros in sorted(by_category.items(), key=lambda item: -item[1])
        },
    }


def op_types(rows: list[dict[str, Any]], top: int = 10) -> tuple[TopItem, ...]:
    """Device self time by TensorFlow op type (MatMul, Sum, BiasAddGrad, ...), summed
    over every op of the type: a transformer's time is spread over hundreds of
    per-layer ops, none of which tops a per-op list."""
    total = sum(float(row.get("total_self_time") or 0) for row in rows) or 1.0
    acc: dict[str, list[float]] = {}
    for row in rows:
        kind = str(row.get("type") or "")
        sums = acc.setdefault(kind, [0.0, 0.0, 0.0])
        sums[0] += float(row.get("total_self_time") or 0)
        sums[1] += int(row.get("occurrences") or 0)
        sums[2] += 1
    return tuple(
        TopItem(kind, f"{int(ops)} ops", self_time, int(self_count), 100.0 * self_time / total)
        for kind, (self_time, self_count, ops) in sorted(acc.items(), key=lambda item: -item[1][0])[
            :top
        ]
    )
