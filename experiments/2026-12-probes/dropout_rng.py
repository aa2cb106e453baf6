"""Dropout's masks under XLA on the GPU: Keras' own against tfaccel's, side by side.

    python experiments/2026-12-probes/dropout_rng.py --out dropout-rng.json [--micro-batch 256]
        [--bert-layers 12 --bert-batch 2048 --bert-settings '{"precision": ...}']

Part 1 (in this process): the attention probabilities' dropout as BERT-base trains it,
bf16 under XLA, forward and backward: softmax of [batch, 12, 128, 128] scores, dropout
0.1, the product with the values, the gradients of both inputs. Also the hidden
states' dropout ([batch, 128, 768], with the residual add). Each dropout of
`tfaccel.optimize.dropout` (keras, mask_once, philox16); for comparison only,
TensorFlow's dropout with an explicit algorithm (`stateless_dropout(rng_alg="philox")`,
`"threefry"`; Keras passes none, so TensorFlow auto-selects), philox16 without the
barrier that keeps its mask (`philox16_fused`), and no dropout at all (what the masks
cost in total). Milliseconds per call, median of 5 repeats of 10 calls.

Part 2 (one child process each, through tune's trial runner): KerasHub BERT training
with `--bert-layers` layers, the given settings, for each dropout; `--rounds 2` runs
the order again reversed, so that no dropout always runs first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

DROPOUTS = ("keras", "mask_once", "philox16")
REFERENCES = ("philox", "threefry", "philox16_fused", "none")
BERT_SETTINGS = {
    "precision": "mixed_bfloat16",
    "xla": "jit",
    "batch_size": 2048,
    "xla_options": ["cublaslt", "cudnn_layer_norm"],
}


def bert_hub_layers() -> Any:
    """The built-in bert_hub workload with BENCH_BERT_LAYERS layers (a trial's entry
    point: `benchmarks.dropout_rng:bert_hub_layers`)."""
    import os

    from tfaccel.workloads.builtin import bert_hub

    return bert_hub(layers=int(os.environ.get("BENCH_BERT_LAYERS", "12")))


def micro(batch: int, variants: list[str]) -> list[dict[str, Any]]:
    import keras
    import tensorflow as tf

    from tfaccel.bench.micro import sync_device
    from tfaccel.bench.timer import measure
    from tfaccel.optimize import dropout

    rng = tf.random.Generator.from_seed(0)
    scores = tf.cast(rng.normal([batch, 12, 128, 128]), tf.bfloat16)
    values = tf.cast(rng.normal([batch, 12, 128, 64]), tf.bfloat16)
    hidden = tf.cast(rng.normal([batch, 128, 768]), tf.bfloat16)
    w_att = tf.cast(rng.normal([batch, 12, 128, 64]), tf.float32)
    w_hid = tf.cast(rng.normal([batch, 128, 768]), tf.float32)
    rows = []
    for name in variants:
        seed = keras.random.SeedGenerator(1)

        def drop(x: Any, name: str = name, seed: Any = seed) -> Any:
            if name == "none":
                return x
            if name in ("philox", "threefry"):
                s = tf.cast(seed.next()[:2], tf.int32)
                return tf.nn.experimental.stateless_dropout(x, 0.1, s, rng_alg=name)
            if name == "philox16_fused":  # philox16 without the barrier
                s = tf.cast(seed.next()[:2], tf.int32)
                keep = dropout.philox16_keep(tf, tf.shape(x), s, 0.1)
                return tf.where(keep, x * tf.constant(1 / 0.9, x.dtype), tf.zeros([], x.dtype))
            return keras.random.dropout(x, 0.1, seed=seed)

        if name in DROPOUTS:
            dropout.set_dropout(name)

        @tf.function(jit_compile=True)
        def attention(s: Any, v: Any) -> Any:
            with tf.GradientTape() as tape:
                tape.watch([s, v])
                p = tf.nn.softmax(s)
                o = tf.matmul(drop(p), v)
                loss = tf.reduce_sum(tf.cast(o, tf.float32) * w_att)
            return tape.gradient(loss, [s, v])

        @tf.function(jit_compile=True)
        def residual(h: Any) -> Any:
            with tf.GradientTape() as tape:
                tape.watch(h)
                o = h + drop(h * 2)
                loss = tf.reduce_sum(tf.cast(o, tf.float32) * w_hid)
            return tape.gradient(loss, h)

        for part, fn, elements in (
            ("attention", lambda: attention(scores, values)[0], batch * 12 * 128 * 128),
            ("hidden", lambda: residual(hidden), batch * 128 * 768),
        ):
            m = measure(
                f"{part} {name}",
                fn,
                work=1.0,
                unit="calls/s",
                sync=sync_device,
                repeats=5,
                number=10,
                per_call_time=True,
            )
            ms = [x / 1000 for x in m.samples]
            row = {
                "part": part,
                "dropout": name,
                "batch": batch,
                "elements": elements,
                "ms": statistics.median(ms),
                "ms_samples": ms,
                "first_call_s": m.warmup_s,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    dropout.set_dropout("keras")
    return rows


def bert(
    layers: int, base: dict[str, Any], variants: list[str], rounds: int, timeout: float
) -> list[dict[str, Any]]:
    import os

    from tfaccel.optimize.settings import Settings
    from tfaccel.trial.runner import StepPlan, run_trial

    os.environ["BENCH_BERT_LAYERS"] = str(layers)
    workload = "bert_hub" if layers == 12 else "benchmarks.dropout_rng:bert_hub_layers"
    plan = StepPlan(warmup=10, windows=5, window=20, window_s=3.0)
    rows = []
    for r in range(rounds):
        for name in variants if r % 2 == 0 else variants[::-1]:
            s = Settings(**{**base, "xla_options": tuple(base.get("xla_options", ()))})
            s = s.replace(dropout=name)
            res = run_trial(workload, s, plan, timeout)
            row = {
                "round": r,
                "layers": layers,
                "dropout": name,
                "label": res.label,
                "status": res.status,
                "samples_per_s": res.samples_per_s,
                "spread": res.spread,
                "windows": list(res.windows),
                "compile_s": res.compile_s,
                "peak_memory_bytes": res.peak_memory_bytes,
                "losses": list(res.losses),
                "wall_s": res.wall_s,
                "error": res.error,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--micro-batch", type=int, default=256, help="0: skip part 1")
    ap.add_argument("--micro", default=",".join(DROPOUTS + REFERENCES))
    ap.add_argument("--bert-layers", type=int, default=0, help="0: skip part 2")
    ap.add_argument("--bert-batch", type=int, default=None)
    ap.add_argument("--bert-settings", default=json.dumps(BERT_SETTINGS))
    ap.add_argument("--bert", default=",".join(DROPOUTS), help="dropouts of part 2")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args(argv)
    micro_variants = [x for x in args.micro.split(",") if x]
    bert_variants = [x for x in args.bert.split(",") if x]
    bad = [x for x in micro_variants if x not in DROPOUTS + REFERENCES]
    bad += [x for x in bert_variants if x not in DROPOUTS]
    if bad:
        ap.error(f"unknown dropouts {bad}: part 1 takes {DROPOUTS + REFERENCES}, part 2 {DROPOUTS}")
    try:
        base = json.loads(args.bert_settings)
    except json.JSONDecodeError as exc:
        ap.error(f"--bert-settings is not JSON: {exc}")
    if args.bert_batch:
        base["batch_size"] = args.bert_batch
    out: dict[str, Any] = {"schema": "tfaccel.dropout-rng/1"}
    if args.micro_batch:
        out["micro"] = micro(args.micro_batch, micro_variants)
    if args.bert_layers:
        out["bert_settings"] = base
        out["bert"] = bert(args.bert_layers, base, bert_variants, args.rounds, args.timeout)
    from tfaccel.environment import environment

    out["environment"] = environment()
    text = json.dumps(out, indent=2)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    raise SystemExit(main())
