"""A trace of KerasHub GPT-2 124M `generate` at batch 1, for `tfaccel profile analyze`.

    python experiments/2026-12-probes/profile_gpt2.py --logdir prof-gpt2 [--calls 3] [--batch 1]
        [--precision bfloat16] [--xla-options gemv_as_gemm]
    tfaccel profile analyze prof-gpt2 --format json

Issue 5's GPT-2 figure (1,347 tokens/s at batch 1 in bf16, 0.74 ms a token, when a
token reads about 250 MB of weights: 0.05 ms at this GPU's bandwidth) says the decoding
loop is not limited by the GPU's arithmetic or memory. This trace says what a token
costs instead: kernels per token, the gaps between them, the time in GEMMs. Each
`generate` call (32-token prompt + 128 new, greedy, bf16) is one "step" of the trace,
marked as TensorFlow marks training steps; the first call (tracing, XLA compilation) is
run before the capture.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--logdir", type=Path, required=True)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--precision", default="mixed_bfloat16")
    ap.add_argument("--xla-options", default="", help="comma-separated, as tfaccel.configure")
    args = ap.parse_args()

    from tfaccel.optimize import configure

    # Before TensorFlow starts: the XLA options go into XLA_FLAGS.
    configure(
        precision=args.precision,
        xla_options=tuple(x for x in args.xla_options.split(",") if x),
    )

    import numpy as np
    import tensorflow as tf

    from tfaccel.profile import capture
    from tfaccel.workloads.builtin import gpt2_causal_lm

    lm = gpt2_causal_lm()
    lm.compile(sampler="greedy")
    prompt, new = 32, 128
    ids = np.zeros((args.batch, prompt + new), "int32")
    ids[:, :prompt] = np.random.default_rng(0).integers(1, 50257, (args.batch, prompt))
    mask = np.zeros_like(ids, dtype=bool)
    mask[:, :prompt] = True
    inputs = {"token_ids": ids, "padding_mask": mask}
    lm.generate(inputs, stop_token_ids=None)  # tracing and XLA compilation, not traced
    with capture.trace(args.logdir):
        for i in range(args.calls):
            with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
                lm.generate(inputs, stop_token_ids=None)
    capture.write_run_meta(
        args.logdir,
        {"samples_per_step": args.batch * new, "workload": "gpt2 generate", "unit": "tokens"},
    )
    print(json.dumps({"logdir": str(args.logdir), "calls": args.calls, "tokens_per_call": new}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
