"""GPT-2 generation under XLA's command-buffer (CUDA graph) settings, side by side.

    python experiments/2026-12-probes/gpt2_xla_flags.py --out gpt2-xla-flags.json [--batches 1,16]

KerasHub's `generate` runs its decoding loop as one XLA while loop. At batch 1 a token
is about 150 small kernels, so the launch path, not the GPU's arithmetic, sets the
speed. XLA can record kernels into CUDA graphs ("command buffers"); this script runs
`tfaccel.bench.inference.gpt2_generation` (bf16, greedy) in one child process per
setting, so each starts XLA fresh, in the order A B C (then C B A with --rounds 2, so
that no setting always runs first):
- default: XLA's own default command buffers;
- off: command buffers off (what the defaults are worth);
- while: command buffers that also take in the while loop and its conditionals (the
  decoding loop itself), CUDA 12.3 or newer;
- all: also the dynamic-slice fusions (the KV cache's per-layer slices and updates,
  which otherwise split a token's kernels into several graphs) and collectives;
- all-min1: `all`, with graphs of any size (XLA's default leaves out runs of fewer than
  5 commands);
- all-unroll: `all`, with XLA unrolling loops inside command buffers;
- no-triton: XLA's Triton GEMM fusions off, so every matrix product (at batch 1 a
  vector times a matrix) goes to cuBLAS;
- cublaslt: cuBLASLt for the GEMMs, with the bias and GELU in their epilogues;
- no-dsr: without XLA's dot-strength-reduction pass, which rewrites every
  vector-times-matrix product under 10M elements (at batch 1, each layer's four) into
  an elementwise multiply, written out, and a reduction; without it they stay GEMMs.

`--precisions mixed_bfloat16,bfloat16` runs each setting under each Keras dtype policy:
`bfloat16` stores the weights in bf16, as models are served, where the mixed policy
casts every float32 weight to bf16 again for each token.

On the H200 at batch 1, mixed_bfloat16 unless said: default 1,347 tokens/s, off 948,
while 1,344 (2026-11-30); all 1,363, all-min1 1,357, no-triton 1,328; bfloat16 1,553,
bfloat16 + no-dsr 1,889 (2026-12-01). At batch 16, bfloat16: 18,326 and 18,398 with
no-dsr. Files: results/gpt2-xla-flags*-h200.json, results/gpt2-bf16-gemv-h200.json.

`--loops keras_hub,tfaccel` runs each setting with KerasHub's `generate` and with
tfaccel's greedy loop (a KV cache per layer instead of one re-stacked every token; the
same tokens, tested on the CPU), not yet measured on a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ALL = (
    "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,COLLECTIVES,"
    "DYNAMIC_SLICE_FUSION,DYNAMIC_SLICE_COPY_FUSION,WHILE,CONDITIONAL"
)
SETTINGS = {
    "default": "",
    "off": "--xla_gpu_enable_command_buffer=",
    "while": "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,"
    "WHILE,CONDITIONAL",
    "all": ALL,
    "all-min1": f"{ALL} --xla_gpu_graph_min_graph_size=1",
    "all-unroll": f"{ALL} --xla_gpu_command_buffer_unroll_loops=true",
    "no-triton": "--xla_gpu_enable_triton_gemm=false",
    "cublaslt": "--xla_gpu_enable_cublaslt=true",
    "no-dsr": "--xla_disable_hlo_passes=dot-strength-reduction",
    # With the products kept as GEMMs the GPU waits on kernel launches (251 kernels a
    # token, 1-3 us each): command buffers may pay now where they did not before.
    "no-dsr-all": f"--xla_disable_hlo_passes=dot-strength-reduction {ALL}",
    "no-dsr-all-min1": f"--xla_disable_hlo_passes=dot-strength-reduction {ALL} "
    "--xla_gpu_graph_min_graph_size=1",
}


def child(batch: int, precision: str, loop: str) -> dict[str, object]:
    from tfaccel.bench.inference import gpt2_generation

    rate, ttft = gpt2_generation(batch, precision=precision, repeats=3, loop=loop)
    return {
        "tokens_per_s": list(rate.samples),
        "ttft_ms": list(ttft.samples),
        "first_call_s": rate.warmup_s,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--batches", default="1")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--precision", default="mixed_bfloat16", help=argparse.SUPPRESS)
    ap.add_argument("--precisions", default="mixed_bfloat16", help="Keras dtype policies")
    ap.add_argument("--settings", default=",".join(SETTINGS), help="which, comma-separated")
    ap.add_argument(
        "--loops",
        default="keras_hub",
        help="decoding loops: keras_hub (its generate), tfaccel (bench.inference."
        "greedy_decoder: a cache per layer, same tokens), fused (greedy_decoder's fused step), "
        "fused_generate (KerasHub's generate after optimize.decoding.fuse_generation)",
    )
    ap.add_argument("--loop", default="keras_hub", help=argparse.SUPPRESS)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    precisions = [x.strip() for x in args.precisions.split(",") if x.strip()]
    loops = [x.strip() for x in args.loops.split(",") if x.strip()]
    if args.child:
        result = child(int(args.child), args.precision, args.loop)
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    runs: list[dict[str, object]] = []
    for batch in [int(b) for b in args.batches.split(",")]:
        for r in range(args.rounds):
            chosen = [x.strip() for x in args.settings.split(",") if x.strip()]
            unknown = [x for x in chosen if x not in SETTINGS]
            if unknown:
                ap.error(f"unknown settings {unknown}; expected some of {list(SETTINGS)}")
            order = [(x, SETTINGS[x], p, lp) for p in precisions for x in chosen for lp in loops]
            for name, flags, precision, loop in order if r % 2 == 0 else order[::-1]:
                env = dict(os.environ)
                env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flags}".strip()
                cmd = [sys.executable, __file__, "--child", str(batch)]
                p = subprocess.run(
                    [*cmd, "--precision", precision, "--loop", loop],
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=900,
                    check=False,
                )
                line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
                row: dict[str, object] = {
                    "batch": batch,
                    "precision": precision,
                    "setting": name,
                    "loop": loop,
                    "xla_flags": flags,
                }
                if line is None:
                    row["error"] = p.stderr[-1500:]
                else:
                    row.update(json.loads(line[7:]))
                runs.append(row)
                print(json.dumps(row), flush=True)
    summary = {}
    for row in runs:
        if "tokens_per_s" in row:
            key = f"batch={row['batch']} {row['precision']} {row['setting']}"
            key += "" if row["loop"] == "keras_hub" else f" loop={row['loop']}"
            summary.setdefault(key, []).extend(row["tokens_per_s"])  # type: ignore[attr-defined]
    from tfaccel.environment import environment  # versions and NVML only: no TF start

    out = {
        "schema": "tfaccel.gpt2-xla-flags/1",
        "environment": environment(),
        "precisions": precisions,
        "median_tokens_per_s": {k: statistics.median(v) for k, v in summary.items()},
        "runs": runs,
    }
    text = json.dumps(out, indent=2)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
