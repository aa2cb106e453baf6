"""FP8 matrix products for training on GPUs with FP8 tensor cores (compute capability
8.9+: Ada, Hopper), through Keras' own float8 quantization.

`configure(float8=True)` makes `report.compile(model)` call Keras'
`model.quantize("float8", filters=...)` first. Each quantized `Dense` and `EinsumDense`
layer then quantizes and dequantizes its input and kernel to float8 e4m3 (and the
gradient flowing back into its output to e5m2), with per-tensor scales from a history
of absolute maxima, kept as non-trainable variables. Under XLA, the GEMM rewriter turns
each such product into a cuBLASLt FP8 GEMM, which runs at twice the bf16 rate on an
H100/H200. Without XLA, or on other GPUs and the CPU, the products stay 16-bit and the
quantization only adds work and rounding: `tune` tries it on FP8 hardware only, behind
the accuracy guard.

float8 implies the XLA option "cublas_gemm" (XLA's Triton GEMM fusions off): with them
on, XLA (TF 2.21) folds Keras' quantize-dequantize pattern back into a bf16 product and
no FP8 GEMM is formed. The gain is small at BERT-base's sizes: each quantized product
adds passes over its input and output gradient (the absolute maxima, the f8 copies) that
take back most of what the FP8 GEMM saves.

Left out: layers with a kernel dimension under 8 (a classifier's few classes), whose
products do not run on FP8 tensor cores and would only lose precision, and layers that
do not implement float8 (embeddings, convolutions).
"""

from __future__ import annotations

from typing import Any

from tfaccel.errors import InputError
from tfaccel.hardware.capabilities import supports

MIN_DIM = 8


def fp8_capable(compute_capability: str | None) -> bool:
    """Does a GPU of this compute capability have FP8 tensor cores?"""
    return supports(compute_capability, "fp8")


def _kernel(layer: Any) -> Any:
    kernel = getattr(layer, "_kernel", None)
    return kernel if kernel is not None else getattr(layer, "kernel", None)


def quantizable(layer: Any) -> bool:
    """A Dense or EinsumDense layer whose kernel has no dimension under MIN_DIM."""
    import keras

    if type(layer) not in (keras.layers.Dense, keras.layers.EinsumDense):
        return False
    kernel = _kernel(layer)
    return kernel is not None and min(int(dim) for dim in kernel.shape) >= MIN_DIM


def quantize_float8(model: Any) -> list[str]:
    """Quantize `model`'s quantizable layers to float8 (Keras' `quantize("float8")`);
    returns their names. The model must be built; layers already in float8 stay so."""
    import keras

    if not isinstance(model, keras.Model):
        raise InputError(
            "float8 needs a Keras model",
            expected="a keras.Model",
            received=type(model).__name__,
        )
    todo = [
        layer
        for layer in model._flatten_layers()
        if quantizable(layer) and getattr(layer, "quantization_mode", None) != "float8"
    ]
    # A model that only holds built models (a GAN's, with a train_step of its own and
    # no call) is never built itself: the layers with weights are what counts.
    if not model.built and not todo:
        raise InputError(
            f"float8 needs a built model: {model.name} has no weights yet",
            expected="a model built on keras.Input(...), or called once on data, "
            "before report.compile(model)",
            received="an unbuilt model",
        )
    names = {id(layer) for layer in todo}
    from tfaccel.workloads.flops import held_models

    # Keras quantizes built models: an unbuilt one through the built models it holds
    owners = [model] if model.built else [sub for sub in held_models(model) if sub.built]
    for owner in owners if todo else ():
        owner.quantize("float8", filters=lambda layer: id(layer) in names)
    return [
        layer.name
        for layer in model._flatten_layers()
        if getattr(layer, "quantization_mode", None) == "float8"
    ]
