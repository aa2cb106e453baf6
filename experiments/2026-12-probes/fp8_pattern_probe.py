"""Which FP8 matrix-product patterns written in TensorFlow XLA's GPU compiler turns into
cuBLASLt FP8 GEMMs, under which XLA flags.

    python experiments/2026-12-probes/fp8_pattern_probe.py --out fp8-pattern-probe.json [--hlo-dir DIR]

A 1024 x 1024 product under `jit_compile` for each pattern (Keras' float8 pattern among
them), once per XLA_FLAGS setting, each setting in a child process of its own (XLA reads
its flags once per process). A pattern counts when the optimized HLO calls cuBLASLt's
FP8 GEMM. This is how float8's need of the cublas_gemm option (Triton GEMMs off) was
found on the H200 (benchmarks/README.md, "Results of lease I").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

FLAG_SETS = (
    "",
    "--xla_allow_excess_precision=false",
    "--xla_gpu_enable_triton_gemm=false",
)
PATTERNS = {
    "keras_like": "Keras' float8 pattern: quantize/dequantize in bf16 with a bf16 scale",
    "f32_scale": "quantize and dequantize in float32, a float32 product",
    "f32_scale_bf16_out": "the same, the product cast to bf16",
    "bf16_deq_f32_scale": "f8 converted to bf16, times a float32 scale cast to bf16",
    "no_scale": "an f8 round trip, no scale",
}


def patterns() -> dict[str, Any]:
    import tensorflow as tf

    e4m3 = tf.dtypes.experimental.float8_e4m3fn

    def f8(x: Any, scale: Any) -> Any:
        return tf.cast(tf.clip_by_value(x / scale, -448.0, 448.0), e4m3)

    def keras_like(x: Any, w: Any, sx: Any, sw: Any) -> Any:
        def qdq(t: Any, s: Any) -> Any:
            t, s = tf.cast(t, tf.bfloat16), tf.cast(s, tf.bfloat16)
            return tf.cast(f8(t, s), tf.bfloat16) * s

        return tf.matmul(qdq(x, sx), qdq(w, sw))

    def f32_scale(x: Any, w: Any, sx: Any, sw: Any) -> Any:
        return tf.matmul(tf.cast(f8(x, sx), tf.float32) * sx, tf.cast(f8(w, sw), tf.float32) * sw)

    def f32_scale_bf16_out(x: Any, w: Any, sx: Any, sw: Any) -> Any:
        return tf.cast(f32_scale(x, w, sx, sw), tf.bfloat16)

    def bf16_deq_f32_scale(x: Any, w: Any, sx: Any, sw: Any) -> Any:
        def deq(t: Any, s: Any) -> Any:
            return tf.cast(f8(t, s), tf.bfloat16) * tf.cast(s, tf.bfloat16)

        return tf.matmul(deq(x, sx), deq(w, sw))

    def no_scale(x: Any, w: Any, sx: Any, sw: Any) -> Any:
        return tf.matmul(
            tf.cast(tf.cast(x, e4m3), tf.bfloat16), tf.cast(tf.cast(w, e4m3), tf.bfloat16)
        )

    fns = (keras_like, f32_scale, f32_scale_bf16_out, bf16_deq_f32_scale, no_scale)
    return {f.__name__: f for f in fns}


def probe(hlo_dir: Path | None, tag: int) -> dict[str, Any]:
    """This process's verdict for each pattern (its XLA_FLAGS are fixed already)."""
    import tensorflow as tf

    x, w, s = tf.random.normal((1024, 1024)), tf.random.normal((1024, 1024)), tf.constant(0.5)
    out = {}
    for name, fn in patterns().items():
        f = tf.function(fn, jit_compile=True)
        hlo = f.experimental_get_compiler_ir(x, w, s, s)(stage="optimized_hlo")
        calls = sorted({c.split('"')[0] for c in hlo.split('custom_call_target="')[1:]})
        out[name] = {
            "f8_gemm": "__cublas$lt$matmul$f8" in hlo,
            "custom_calls": calls,
            "f8_in_hlo": "f8e4m3fn" in hlo,
        }
        if hlo_dir is not None:
            (hlo_dir / f"{name}-{tag}.hlo").write_text(hlo)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the JSON to write")
    ap.add_argument("--hlo-dir", type=Path, help="also keep each optimized HLO here")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)  # one flag set's run
    args = ap.parse_args(argv)
    if args.hlo_dir is not None:
        args.hlo_dir.mkdir(parents=True, exist_ok=True)
    if args.child is not None:
        args.out.write_text(json.dumps(probe(args.hlo_dir, args.child)))
        return 0
    if args.out.exists():
        print(f"error: {args.out} exists; choose another --out", file=sys.stderr)
        return 2
    runs = []
    for i, flags in enumerate(FLAG_SETS):
        part = args.out.with_suffix(f".part{i}.json")
        cmd = [sys.executable, __file__, "--out", str(part), "--child", str(i)]
        if args.hlo_dir is not None:
            cmd += ["--hlo-dir", str(args.hlo_dir)]
        env = {**os.environ, "XLA_FLAGS": flags}
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            runs.append({"xla_flags": flags or None, "error": proc.stderr[-2000:]})
        else:
            runs.append({"xla_flags": flags or None, "patterns": json.loads(part.read_text())})
            part.unlink()
        print(json.dumps(runs[-1]))
    from tfaccel.environment import environment

    result = {
        "schema": "tfaccel.fp8-pattern-probe/1",
        "patterns": PATTERNS,
        "runs": runs,
        "environment": environment(),
    }
    args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
