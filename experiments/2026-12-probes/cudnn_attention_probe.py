"""Can TensorFlow reach cuDNN's flash attention through XLA? A feasibility probe.

    python experiments/2026-12-probes/cudnn_attention_probe.py --out cudnn-attention.json [--batch 256]
        [--no-dropout]

With TF 2.21 the dropout step crashes the process (a segmentation fault at the first
execution, H200, leases J and K), on TensorFlow's own XLA path and through PjRt
(TF_XLA_FLAGS="--tf_xla_use_device_api_for_xla_launch=true
--tf_xla_enable_device_api_for_gpu=true") alike: --no-dropout leaves it out, so that the
timing runs (results/cudnn-attention-h200-lease-k.json).

XLA deleted its pattern rewriter for cuDNN's fused attention in 2025 (openxla/xla#22225);
frameworks now emit the custom call themselves, as JAX's `dot_product_attention` does
(jax/_src/cudnn/fused_attention_stablehlo.py). TensorFlow has no such op, but its
`XlaCustomCallV2` emits any custom call with a backend config. This probe emits cuDNN's
forward and backward attention calls that way (`tfaccel.optimize.attention`, JAX's
format in the BNTH layout, so every operand and result has XLA's default layout, the
only one XlaCustomCallV2 gives), and checks each variant against attention written out
in TensorFlow:
- softmax: out, dq, dk, dv against the reference (bf16 inputs, float32 reference);
- bias: an additive [B, 1, T, S] mask (BERT's padding mask as a bias);
- dropout 0.1: whether it runs, whether two calls draw different masks, and whether
  the backward call drops what the forward call dropped (<out, dO> = <v, dv>);
- timing at BERT-base's attention shapes (batch x 12 heads x 128 x 64), forward and
  backward, cuDNN against XLA's own kernels (with and without dropout);
Each variant's error is recorded, not raised: a compile error is a finding too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any


def cudnn_attention(dropout: float = 0.0, seed: int = 42) -> Any:
    """attention(q, k, v, bias=None) on [B, N, T, H] tensors through cuDNN
    (tfaccel.optimize.attention.flash_attention)."""
    from tfaccel.optimize.attention import flash_attention

    def attend(q: Any, k: Any, v: Any, bias: Any = None) -> Any:
        return flash_attention(q, k, v, bias, dropout=dropout, seed=seed)

    return attend


def reference_attention(dropout: float = 0.0) -> Any:
    """The same attention written out in TensorFlow (what XLA compiles by itself)."""
    import tensorflow as tf

    def attention(q: Any, k: Any, v: Any, bias: Any = None, seed: Any = (1, 2)) -> Any:
        scores = tf.einsum("bnth,bnsh->bnts", q, k) * (1.0 / math.sqrt(int(q.shape[3])))
        if bias is not None:
            scores = scores + bias
        p = tf.nn.softmax(tf.cast(scores, tf.float32), axis=-1)
        p = tf.cast(p, q.dtype)
        if dropout > 0:
            p = tf.nn.experimental.stateless_dropout(p, dropout, seed=seed, rng_alg="philox")
        return tf.einsum("bnts,bnsh->bnth", p, v)

    return attention


def _value_and_grads(attn: Any, q: Any, k: Any, v: Any, bias: Any, d_out: Any) -> Any:
    import tensorflow as tf

    with tf.GradientTape() as tape:
        tape.watch([q, k, v])
        out = attn(q, k, v, bias) if bias is not None else attn(q, k, v)
    return (out, *tape.gradient(out, [q, k, v], output_gradients=d_out))


def _inputs(batch: int, heads: int, t: int, h: int, seed: int = 0) -> Any:
    import tensorflow as tf

    g = tf.random.Generator.from_seed(seed)
    q, k, v, d_out = (tf.cast(g.normal((batch, heads, t, h)), tf.bfloat16) for _ in range(4))
    # BERT's padding mask as a bias: the last quarter of each sequence is padding
    keep = tf.sequence_mask(tf.fill([batch], t - t // 4), t)
    bias = tf.where(keep, 0.0, -1e9)[:, None, None, :] * tf.ones((1, 1, t, 1))
    return q, k, v, d_out, tf.cast(bias, tf.bfloat16)


def _max_rel_err(a: Any, b: Any) -> float:
    import tensorflow as tf

    a, b = tf.cast(a, tf.float32), tf.cast(b, tf.float32)
    return float(tf.reduce_max(tf.abs(a - b)) / (tf.reduce_max(tf.abs(b)) + 1e-12))


def check(bias: bool, batch: int = 4) -> dict[str, Any]:
    """cuDNN's softmax attention (with the bias or not) against the reference."""
    import tensorflow as tf

    q, k, v, d_out, b = _inputs(batch, 12, 128, 64)
    b = b if bias else None
    ours = tf.function(lambda *a: _value_and_grads(cudnn_attention(), *a), jit_compile=True)
    ref_attn = reference_attention()

    def ref(q: Any, k: Any, v: Any, b: Any, d: Any) -> Any:
        f32 = [tf.cast(x, tf.float32) if x is not None else None for x in (q, k, v, b, d)]
        return _value_and_grads(ref_attn, *f32)

    got, want = ours(q, k, v, b, d_out), ref(q, k, v, b, d_out)
    names = ("out", "dq", "dk", "dv")
    pairs = zip(names, got, want, strict=True)
    return {f"{n}_max_rel_err": _max_rel_err(x, y) for n, x, y in pairs}


def _adjoint_gap(out: Any, d_out: Any, v: Any, dv: Any) -> float:
    """|<out, dO> - <v, dv>| / |<out, dO>|: out = A v for the dropped-out probabilities
    A, so dv = A^T dO and the gap is rounding only if the backward call dropped what the
    forward call dropped."""
    import tensorflow as tf

    a, d, b, db = (tf.cast(x, tf.float32) for x in (out, d_out, v, dv))
    lhs, rhs = float(tf.reduce_sum(a * d)), float(tf.reduce_sum(b * db))
    return abs(lhs - rhs) / (abs(lhs) + 1e-30)


def check_dropout(batch: int = 4) -> dict[str, Any]:
    """Dropout 0.1 inside cuDNN's kernel: it runs; do two executions of one compiled
    function draw different masks; does the backward call use the forward call's mask
    (the adjoint gap, against the same gap without dropout)?"""
    import tensorflow as tf

    q, k, v, d_out, _ = _inputs(batch, 12, 128, 64)
    f = tf.function(
        lambda *a: _value_and_grads(cudnn_attention(dropout=0.1), *a, None, d_out),
        jit_compile=True,
    )
    first, second = f(q, k, v), f(q, k, v)
    no_drop = tf.function(
        lambda *a: _value_and_grads(cudnn_attention(), *a, None, d_out), jit_compile=True
    )(q, k, v)
    return {
        "two_calls_differ": bool(tf.reduce_any(first[0] != second[0])),
        "out_rel_diff_to_no_dropout": _max_rel_err(first[0], no_drop[0]),
        "adjoint_gap": [_adjoint_gap(r[0], d_out, v, r[3]) for r in (first, second)],
        "adjoint_gap_no_dropout": _adjoint_gap(no_drop[0], d_out, v, no_drop[3]),
    }


def timing(batch: int, repeats: int = 20, dropout: bool = True) -> dict[str, Any]:
    """Forward and backward, ms per call, at BERT-base's attention shapes."""
    import tensorflow as tf

    q, k, v, d_out, bias = _inputs(batch, 12, 128, 64)
    seed = tf.constant([1, 2], tf.int32)
    fns = {
        "xla_softmax": lambda q, k, v: _value_and_grads(
            reference_attention(), q, k, v, bias, d_out
        ),
        "xla_softmax_dropout": lambda q, k, v: _value_and_grads(
            lambda *a: reference_attention(0.1)(*a, seed=seed), q, k, v, bias, d_out
        ),
        "cudnn_softmax": lambda q, k, v: _value_and_grads(cudnn_attention(), q, k, v, bias, d_out),
        "cudnn_softmax_dropout": lambda q, k, v: _value_and_grads(
            cudnn_attention(0.1), q, k, v, bias, d_out
        ),
    }
    if not dropout:
        fns = {k: f for k, f in fns.items() if not k.endswith("dropout")}
    out: dict[str, Any] = {}
    for name, fn in fns.items():
        try:
            f = tf.function(fn, jit_compile=True)
            f(q, k, v)[0].numpy()  # compile
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(repeats):
                    r = f(q, k, v)
                r[0].numpy()
                times.append((time.perf_counter() - t0) / repeats * 1e3)
            out[name] = {"ms": sorted(times)[len(times) // 2], "all_ms": times}
        except Exception as e:  # a finding, recorded
            out[name] = {"error": f"{type(e).__name__}: {str(e)[-1500:]}"}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the JSON to write")
    ap.add_argument("--batch", type=int, default=256, help="batch of the timing (BERT: 2048/8)")
    ap.add_argument(
        "--no-dropout",
        action="store_true",
        help="leave out cuDNN's dropout, which crashes TF 2.21 (see tfaccel.optimize.attention)",
    )
    args = ap.parse_args(argv)
    if args.out.exists():
        print(f"error: {args.out} exists; choose another --out", file=sys.stderr)
        return 2
    import tensorflow as tf

    if not tf.config.list_physical_devices("GPU"):
        print("error: cuDNN's attention needs a GPU that TensorFlow sees", file=sys.stderr)
        return 2
    result: dict[str, Any] = {
        "schema": "tfaccel.cudnn-attention-probe/1",
        "tf_xla_flags": os.environ.get("TF_XLA_FLAGS", ""),
    }
    steps = {
        "softmax": lambda: check(bias=False),
        "bias": lambda: check(bias=True),
        "dropout": check_dropout,
        "timing": lambda: timing(args.batch, dropout=not args.no_dropout),
    }
    if args.no_dropout:
        del steps["dropout"]
    for name, step in steps.items():
        try:
            result[name] = step()
        except Exception as e:  # a finding, recorded
            result[name] = {"error": f"{type(e).__name__}: {str(e)[-3000:]}"}
        print(name, json.dumps(result[name])[:2000], flush=True)
    from tfaccel.environment import environment

    result["environment"] = environment()
    args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
