"""Can TensorFlow reach cuDNN's flash attention through XLA? A feasibility probe.

    python benchmarks/cudnn_attention_probe.py --out cudnn-attention.json [--batch 256]

XLA deleted its pattern rewriter for cuDNN's fused attention in 2025 (openxla/xla#22225);
frameworks now emit the custom call themselves, as JAX's `dot_product_attention` does
(jax/_src/cudnn/fused_attention_stablehlo.py). TensorFlow has no such op, but its
`XlaCustomCallV2` emits any custom call with a backend config. This probe emits cuDNN's
forward and backward attention calls that way, in JAX's format (BNTH layout, so every
operand and result has XLA's default layout, the only one XlaCustomCallV2 gives), and
checks each variant against attention written out in TensorFlow:
- softmax: out, dq, dk, dv against the reference (bf16 inputs, float32 reference);
- bias: an additive [B, 1, T, S] mask (BERT's padding mask as a bias);
- dropout 0.1: whether it runs, and whether two calls draw different masks;
- timing at BERT-base's attention shapes (batch x 12 heads x 128 x 64), forward and
  backward, cuDNN against XLA's own kernels (with and without dropout);
- with `--bert-settings JSON`: KerasHub BERT-base training, one child process each
  through tune's trial runner, with Keras' attention and with every MultiHeadAttention
  patched onto cuDNN's (its padding mask as the bias, its dropout inside cuDNN).
Each variant's error is recorded, not raised: a compile error is a finding too.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TARGETS = {  # (backward, dropout, bias) -> custom call target, as JAX names them
    (False, False, False): "__cudnn$fmhaSoftmax",
    (False, False, True): "__cudnn$fmhaScaleBiasSoftmax",
    (False, True, False): "__cudnn$fmhaSoftmaxDropout",
    (False, True, True): "__cudnn$fmhaScaleBiasSoftmaxDropout",
    (True, False, False): "__cudnn$fmhaSoftmaxBackward",
    (True, False, True): "__cudnn$fmhaScaleBiasSoftmaxBackward",
    (True, True, False): "__cudnn$fmhaSoftmaxDropoutBackward",
    (True, True, True): "__cudnn$fmhaScaleBiasSoftmaxDropoutBackward",
}
# BNTH: ((lhs contracting, rhs contracting), (lhs batch, rhs batch)) of each product.
FWD_DOTS = {
    "bmm1_dot_dimension_numbers": ((3, 3), ((0, 1), (0, 1))),  # BNTH,BNSH->BNTS
    "bmm2_dot_dimension_numbers": ((3, 2), ((0, 1), (0, 1))),  # BNTS,BNSH->BNTH
}
BWD_DOTS = {
    "bmm1_grad_gemm1_dot_dimension_numbers": ((2, 2), ((0, 1), (0, 1))),
    "bmm1_grad_gemm2_dot_dimension_numbers": ((3, 2), ((0, 1), (0, 1))),
    "bmm2_grad_gemm1_dot_dimension_numbers": ((2, 2), ((0, 1), (0, 1))),
    "bmm2_grad_gemm2_dot_dimension_numbers": ((3, 3), ((0, 1), (0, 1))),
}


def backend_config(
    shape: tuple[int, int, int, int], s: int, scale: float, dropout: float, seed: int, bwd: bool
) -> str:
    b, n, t, _ = shape
    layout = {
        "dim_level_types": [],
        "dim_unique": [],
        "dim_ordered": [],
        "minor_to_major": ["3", "2", "1", "0"],
        "tiles": [],
        "element_size_in_bits": "0",
        "memory_space": "0",
        "index_primitive_type": "PRIMITIVE_TYPE_INVALID",
        "pointer_primitive_type": "PRIMITIVE_TYPE_INVALID",
        "dynamic_shape_metadata_prefix_bytes": "0",
    }
    config: dict[str, Any] = {
        "algorithm": {
            "algo_id": "0",
            "math_type": "TENSOR_OP_MATH",
            "tuning_knobs": {"17": "1", "24": "0"},
            "is_cudnn_frontend": True,
            "workspace_size": "0",
        },
        "fmha_scale": scale,
        "dropout_rate": dropout,
        "intermediate_tensor_shape": {
            "element_type": "BF16",
            "dimensions": [str(b), str(n), str(t), str(s)],
            "tuple_shapes": [],
            "layout": layout,
            "is_dynamic_dimension": [False] * 4,
        },
        "seed": seed,
        "is_flash_attention": True,
        "mask_type": "NO_MASK",
        "sliding_window_length": 0,
    }
    for key, ((lc, rc), (lb, rb)) in (BWD_DOTS if bwd else FWD_DOTS).items():
        config[key] = {
            "lhs_contracting_dimensions": [str(lc)],
            "rhs_contracting_dimensions": [str(rc)],
            "lhs_batch_dimensions": [str(i) for i in lb],
            "rhs_batch_dimensions": [str(i) for i in rb],
        }
    return json.dumps(
        {
            "operation_queue_id": "0",
            "wait_on_operation_queues": [],
            "cudnn_fmha_backend_config": config,
        }
    )


def cudnn_attention(dropout: float = 0.0, seed: int = 42) -> Any:
    """attention(q, k, v, bias=None) on [B, N, T, H] bf16 tensors through cuDNN, with a
    gradient through cuDNN's backward call. XLA only (tf.function(jit_compile=True))."""
    import tensorflow as tf
    from tensorflow.compiler.tf2xla.ops import gen_xla_ops

    def call(
        operands: list[Any], target: str, config: str, dtypes: list[Any], shapes: list[Any]
    ) -> Any:
        return gen_xla_ops.xla_custom_call_v2(
            operands=operands,
            call_target_name=target,
            backend_config=config,
            has_side_effect=False,
            result_dtypes=dtypes,
            result_shapes=shapes,
        )

    def attention(q: Any, k: Any, v: Any, bias: Any = None) -> Any:
        has_bias = bias is not None
        shape = tuple(int(d) for d in q.shape)
        s = int(k.shape[2])
        scale = 1.0 / math.sqrt(shape[3])
        b, n, t, _ = shape

        @tf.custom_gradient
        def fn(q: Any, k: Any, v: Any, *bias_: Any) -> Any:
            fwd_config = backend_config(shape, s, scale, dropout, seed, bwd=False)
            out, stats, _ = call(
                [q, k, v, *bias_],
                TARGETS[(False, dropout > 0, has_bias)],
                fwd_config,
                [q.dtype, tf.float32, tf.uint8],
                [list(shape), [b, n, t], [0]],
            )

            def grad(d_out: Any) -> Any:
                bwd_config = backend_config(shape, s, scale, dropout, seed, bwd=True)
                dq, dk, dv, _ = call(
                    [q, k, v, stats, d_out, *bias_, out],
                    TARGETS[(True, dropout > 0, has_bias)],
                    bwd_config,
                    [q.dtype, k.dtype, v.dtype, tf.uint8],
                    [list(shape), list(k.shape), list(v.shape), [0]],
                )
                return (dq, dk, dv, *[tf.zeros_like(x) for x in bias_])

            return out, grad

        return fn(q, k, v, *([bias] if has_bias else []))

    return attention


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


def check_dropout(batch: int = 4) -> dict[str, Any]:
    """Dropout 0.1 inside cuDNN's kernel: it runs; do two calls draw different masks?"""
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
    }


def timing(batch: int, repeats: int = 20) -> dict[str, Any]:
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


# cuDNN's own workaround value for masked scores in bf16 (as JAX uses): not -inf, whose
# subtraction inside the kernel misbehaves.
BF16_MASKED = -float(2 << 40)


def patch_keras_attention() -> None:
    """Every Keras MultiHeadAttention (KerasHub's layers subclass it) through cuDNN's
    attention where it can: 4-D heads, no scores asked for, no causal flag; its boolean
    [B, T, S] mask becomes an additive bias, its dropout rate cuDNN's (training only).
    For this probe's trial; XLA only."""
    import tensorflow as tf
    from keras.src.layers.attention.multi_head_attention import MultiHeadAttention

    original = MultiHeadAttention._compute_attention

    def _compute_attention(  # type: ignore[no-untyped-def]
        self,
        query,
        key,
        value,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
        use_causal_mask=False,
    ):
        if return_attention_scores or use_causal_mask or len(query.shape) != 4:
            return original(
                self,
                query,
                key,
                value,
                attention_mask,
                training,
                return_attention_scores,
                use_causal_mask,
            )
        q, k, v = (tf.transpose(x, [0, 2, 1, 3]) for x in (query, key, value))  # BTNH->BNTH
        bias = None
        if attention_mask is not None:
            mask = tf.cast(attention_mask, tf.bool)
            while len(mask.shape) < 4:
                mask = mask[:, None]
            shape = [q.shape[0] or tf.shape(q)[0], 1, q.shape[2], k.shape[2]]
            bias = tf.broadcast_to(tf.where(mask, 0.0, BF16_MASKED), shape)
            bias = tf.cast(bias, q.dtype)
        rate = float(self._dropout) if training is True else 0.0
        out = cudnn_attention(rate)(q, k, v, bias)
        return tf.transpose(out, [0, 2, 1, 3]), None

    MultiHeadAttention._compute_attention = _compute_attention


def bert_trial(settings: dict[str, Any], cudnn: bool) -> dict[str, Any]:
    """One KerasHub BERT-base trial in this process, Keras' attention or cuDNN's."""
    from tfaccel.tune.trial import run

    if cudnn:
        patch_keras_attention()
    steps = {"warmup": 10, "windows": 5, "window": 20, "window_s": 3.0}
    return run({"workload": "bert_hub", "steps": steps, "settings": settings})  # type: ignore[no-any-return]


def bert(settings: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Keras' attention, then cuDNN's, one child process each, back to back."""
    result: dict[str, Any] = {"settings": settings}
    for name in ("keras", "cudnn"):
        part = out_dir / f"bert-{name}.part.json"
        cmd = [sys.executable, __file__, "--out", str(part), "--bert-child", name]
        cmd += ["--bert-settings", json.dumps(settings)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 or not part.exists():
            result[name] = {"error": proc.stderr[-3000:]}
        else:
            r = json.loads(part.read_text())
            part.unlink()
            windows = r.get("window_samples_per_s") or []
            result[name] = {
                "samples_per_s": sorted(windows)[len(windows) // 2] if windows else None,
                **{
                    k: r.get(k)
                    for k in (
                        "status",
                        "error",
                        "window_samples_per_s",
                        "compile_s",
                        "peak_memory_bytes",
                        "losses",
                    )
                },
            }
        print("bert", name, json.dumps(result[name])[:600], flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the JSON to write")
    ap.add_argument("--batch", type=int, default=256, help="batch of the timing (BERT: 2048/8)")
    ap.add_argument(
        "--bert-settings",
        help="also train KerasHub BERT-base with these configure() settings (JSON), "
        "Keras' attention against cuDNN's",
    )
    ap.add_argument("--bert-child", choices=("keras", "cudnn"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    settings = None
    if args.bert_settings is not None:
        try:
            settings = json.loads(args.bert_settings)
        except json.JSONDecodeError as e:
            ap.error(f"--bert-settings is not JSON ({e}); expected an object of settings")
        if not isinstance(settings, dict):
            ap.error("--bert-settings: expected a JSON object of configure() settings")
    if args.bert_child is not None:
        out = bert_trial(settings or {}, cudnn=args.bert_child == "cudnn")
        args.out.write_text(json.dumps(out))
        return 0
    if args.out.exists():
        print(f"error: {args.out} exists; choose another --out", file=sys.stderr)
        return 2
    import tensorflow as tf

    if not tf.config.list_physical_devices("GPU"):
        print("error: cuDNN's attention needs a GPU that TensorFlow sees", file=sys.stderr)
        return 2
    result: dict[str, Any] = {"schema": "tfaccel.cudnn-attention-probe/1"}
    steps = {
        "softmax": lambda: check(bias=False),
        "bias": lambda: check(bias=True),
        "dropout": check_dropout,
        "timing": lambda: timing(args.batch),
    }
    if settings is not None:
        steps["bert"] = lambda: bert(settings, args.out.parent)
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
