"""Where BERT-base's attention spends its time under XLA: timed, then traced kernel by kernel.

    python experiments/2026-12-probes/attention_kernels.py --out attention-kernels.json [--batch 256]
        [--variants keras_drop,keras_nodrop,...] [--trace-dir prof-attention]

At batch 256 on the H200 the probe (cudnn_attention_probe.py) timed attention's core,
QK^T, the softmax (in float32 there) and the product with V, forward and backward, at
1.63 ms a layer: for BERT-base's 12 layers up to a third of a 60-70 ms training step,
and by an estimate of its FLOPs and bytes 3-4 times what they need at the GPU's rates.
cuDNN's flash attention was no faster (1.68 ms).
This script times Keras' own `MultiHeadAttention._compute_attention` (what KerasHub's
BERT runs, bf16, the padding mask, the gradients of Q, K and V) in one process, then
traces a few calls of each variant with TensorFlow's profiler and lists the kernels
(`tfaccel.profile.analyze`), so that the next change aims at the kernels that cost:
- keras_drop: dropout 0.1, Keras' masks (BERT's training);
- keras_philox16: the same with tfaccel's philox16 masks;
- keras_nodrop: no dropout (what the masks cost, by difference);
- cudnn_nodrop: configure(attention="cudnn")'s path, no dropout (cuDNN's dropout
  crashes TF 2.21).
XLA_FLAGS apply to the whole process: run it again under other flags to compare
(e.g. --xla_gpu_enable_triton_gemm=false). Each variant's error is recorded, not
raised.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

VARIANTS = ("keras_drop", "keras_philox16", "keras_nodrop", "cudnn_nodrop")
HEADS, HEAD_DIM, TOKENS = 12, 64, 128


def step_fn(variant: str, batch: int, heads: int = HEADS, head_dim: int = HEAD_DIM) -> Any:
    """A jit-compiled step: the attention core of one BERT layer (Keras'
    MultiHeadAttention, bf16) forward and backward; returns (fn, its args)."""
    import keras
    import tensorflow as tf

    from tfaccel.optimize import attention, dropout

    dropout.set_dropout("philox16" if variant == "keras_philox16" else "keras")
    attention.set_attention("cudnn" if variant.startswith("cudnn") else "keras")
    rate = 0.0 if variant.endswith("nodrop") else 0.1
    layer = keras.layers.MultiHeadAttention(
        heads, head_dim, dropout=rate, dtype="mixed_bfloat16", name=f"mha_{variant}"
    )
    width = heads * head_dim
    layer(tf.zeros((1, TOKENS, width)), tf.zeros((1, TOKENS, width)))  # builds it
    g = tf.random.Generator.from_seed(0)
    shape = (batch, TOKENS, heads, head_dim)
    q, k, v, d_out = (tf.cast(g.normal(shape), tf.bfloat16) for _ in range(4))
    lengths = tf.maximum(TOKENS // 4, TOKENS - g.uniform([batch], 0, TOKENS // 2, tf.int32))
    mask = tf.sequence_mask(lengths, TOKENS)[:, None, :] & tf.ones((1, TOKENS, 1), tf.bool)
    training = rate > 0

    @tf.function(jit_compile=True)
    def step(q: Any, k: Any, v: Any, mask: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out, _ = layer._compute_attention(q, k, v, attention_mask=mask, training=training)
        return tape.gradient(out, [q, k, v], output_gradients=d_out)

    return step, (q, k, v, mask)


def _kernels(logdir: Path, calls: int) -> dict[str, Any]:
    """The traced calls' kernels: the ten costliest, microseconds per call."""
    from tfaccel.profile.analyze import analyze

    report = analyze(logdir)
    return {
        "top_kernels": [
            {
                "kernel": k.name,
                "op": k.kind,
                "us_per_call": k.total_us / calls,
                "launches_per_call": k.count / calls,
                "share_pct": k.share_pct,
                "tensor_core": k.tensor_core,
            }
            for k in report.top_kernels
        ],
        "kernel_launches_per_call": (report.kernel_launches or 0) / calls,
        "tensor_core_used_pct": report.tensor_core_used_pct,
    }


def run_variant(variant: str, batch: int, trace_dir: Path | None, calls: int = 5) -> dict[str, Any]:
    import tensorflow as tf

    from tfaccel.bench.micro import sync_device
    from tfaccel.bench.timer import measure
    from tfaccel.profile import capture

    step, args = step_fn(variant, batch)
    m = measure(
        variant,
        lambda: step(*args)[0],
        work=1.0,
        unit="calls/s",
        sync=sync_device,
        repeats=5,
        number=20,
        per_call_time=True,
    )
    ms = [x / 1000 for x in m.samples]
    row: dict[str, Any] = {
        "variant": variant,
        "batch": batch,
        "ms": statistics.median(ms),
        "ms_samples": ms,
        "first_call_s": m.warmup_s,
    }
    if trace_dir is not None:
        logdir = trace_dir / variant
        with capture.trace(logdir):
            for i in range(calls):
                with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
                    sync_device(step(*args)[0])
        try:
            row.update(_kernels(logdir, calls))
        except Exception as e:  # a finding, recorded
            row["kernels_error"] = f"{type(e).__name__}: {str(e)[-1500:]}"
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the JSON to write")
    ap.add_argument("--batch", type=int, default=256, help="sequences (BERT's tune: 2048)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    ap.add_argument("--trace-dir", type=Path, default=None, help="trace each variant here")
    args = ap.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown or not variants:
        print(
            f"error: --variants expects some of {', '.join(VARIANTS)}; got {args.variants!r}",
            file=sys.stderr,
        )
        return 2
    if args.batch < 1:
        print("error: --batch must be positive", file=sys.stderr)
        return 2
    if args.out.exists():
        print(f"error: {args.out} exists; choose another --out", file=sys.stderr)
        return 2
    from tfaccel.environment import environment

    result: dict[str, Any] = {
        "schema": "tfaccel.attention-kernels/1",
        "shape": {"heads": HEADS, "head_dim": HEAD_DIM, "tokens": TOKENS},
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "variants": [],
    }
    for variant in variants:
        try:
            row = run_variant(variant, args.batch, args.trace_dir)
        except Exception as e:  # a finding, recorded
            row = {"variant": variant, "error": f"{type(e).__name__}: {str(e)[-3000:]}"}
        result["variants"].append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "top_kernels"}), flush=True)
    result["environment"] = environment()
    args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
