"""BERT-base's four attention projections, forward and backward, Keras' einsum against
tfaccel's flat one (`configure(einsum="flat")`), side by side in one process.

    python experiments/2026-12-probes/einsum_projections.py --out einsum.json [--batch 256]
        [--dtype bfloat16] [--rounds 3]

The query, key and value projections ("abc,cde->abde", 768 -> 12 x 64) and the
attention output ("abcd,cde->abe", 12 x 64 -> 768) of one layer, as KerasHub's BERT
runs them: `EinsumDense` layers under XLA, the gradients of the input and of every
kernel and bias. Keras computes each kernel's gradient per sequence and sums them
(tfaccel/optimize/einsum.py); flat, it is one GEMM. The variants alternate for
`--rounds` rounds, so that a drift of the machine falls on both; the figure is the
median call time of each, and the ratio of the two.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

VARIANTS = ("keras", "flat")
HIDDEN, HEADS, TOKENS = 768, 12, 128


def step_fn(variant: str, batch: int, dtype: str) -> tuple[Any, tuple[Any, ...]]:
    """A jit-compiled step: the four projections forward, their gradients back."""
    import keras
    import tensorflow as tf

    from tfaccel.optimize import einsum

    einsum.set_einsum(variant)
    keras.utils.set_random_seed(0)
    width = HIDDEN // HEADS
    qkv = [
        keras.layers.EinsumDense(
            "abc,cde->abde", output_shape=(None, HEADS, width), bias_axes="de", dtype=dtype
        )
        for _ in range(3)
    ]
    out = keras.layers.EinsumDense(
        "abcd,cde->abe", output_shape=(None, HIDDEN), bias_axes="e", dtype=dtype
    )
    g = tf.random.Generator.from_seed(0)
    x = tf.cast(g.normal((batch, TOKENS, HIDDEN)), dtype)
    heads = tf.cast(g.normal((batch, TOKENS, HEADS, width)), dtype)
    for layer in qkv:
        layer(x)
    out(heads)
    weights = [w for layer in (*qkv, out) for w in layer.trainable_variables]

    @tf.function(jit_compile=True)
    def step(x: Any, heads: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch([x, heads])
            total = sum(tf.reduce_sum(tf.cast(layer(x), tf.float32)) for layer in qkv)
            total += tf.reduce_sum(tf.cast(out(heads), tf.float32))
        return tape.gradient(total, [x, heads, *weights])

    # Traced now, while `variant`'s einsum is the one Keras calls: the other variant's
    # set_einsum comes before this step's first call.
    step.get_concrete_function(x, heads)
    return step, (x, heads)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the JSON to write")
    ap.add_argument("--batch", type=int, default=256, help="sequences of 128 tokens")
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of the two")
    args = ap.parse_args(argv)
    if args.batch < 1 or args.rounds < 1:
        print("error: --batch and --rounds must be positive", file=sys.stderr)
        return 2
    if args.out.exists():
        print(f"error: {args.out} exists; choose another --out", file=sys.stderr)
        return 2
    from tfaccel.bench.micro import sync_device
    from tfaccel.bench.timer import measure
    from tfaccel.environment import environment

    steps = {v: step_fn(v, args.batch, args.dtype) for v in VARIANTS}
    samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
    first: dict[str, float] = {}
    for _ in range(args.rounds):
        for v in VARIANTS:
            step, inputs = steps[v]
            m = measure(
                v,
                lambda step=step, inputs=inputs: step(*inputs)[0],
                work=1.0,
                unit="calls/s",
                sync=sync_device,
                repeats=5,
                number=10,
                per_call_time=True,
            )
            first.setdefault(v, m.warmup_s)
            samples[v].extend(x / 1000 for x in m.samples)
    ms = {v: statistics.median(samples[v]) for v in VARIANTS}
    result: dict[str, Any] = {
        "schema": "tfaccel.einsum-projections/1",
        "shape": {"batch": args.batch, "tokens": TOKENS, "hidden": HIDDEN, "heads": HEADS},
        "dtype": args.dtype,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "variants": [
            {"variant": v, "ms": ms[v], "ms_samples": samples[v], "first_call_s": first[v]}
            for v in VARIANTS
        ],
        "flat_speedup": ms["keras"] / ms["flat"],
        "environment": environment(),
    }
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps({"ms": ms, "flat_speedup": result["flat_speedup"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
